package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/objstore"
)

func runDemoCommand(t *testing.T, dir string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--tour", "--dir", dir, "--rows", "300", "--log-level", "warn"}, &out, &errb)
	return code, out.String() + errb.String()
}

func TestDemoRefusesADirectoryItDidNotCreate(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(precious, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "warehouse"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out := runDemoCommand(t, dir)
	if code != exitError {
		t.Fatalf("demo in a foreign directory: exit %d, want %d\n%s", code, exitError, out)
	}
	for _, want := range []string{"not empty", demoMarker, "new or empty directory"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal should say %q:\n%s", want, out)
		}
	}
	if data, err := os.ReadFile(precious); err != nil || string(data) != "mine" {
		t.Errorf("the demo touched a file it did not create: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "warehouse")); err != nil {
		t.Errorf("the demo removed a directory it did not create: %v", err)
	}
}

func TestDemoRunsTwiceInItsOwnDirectory(t *testing.T) {
	t.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "64KiB")
	dir := filepath.Join(t.TempDir(), "streamidx-demo")
	if code, out := runDemoCommand(t, dir); code != exitOK {
		t.Fatalf("first demo run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
		t.Fatalf("the demo did not mark its directory: %v", err)
	}
	// A file the user put beside the demo's own survives the next run.
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runDemoCommand(t, dir)
	if code != exitOK {
		t.Fatalf("second demo run in the same directory: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "demo finished") {
		t.Errorf("second run did not finish:\n%s", out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the second run removed a file the demo did not create: %v", err)
	}
}

func TestDemoAdoptsAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := prepareDemoDir(dir); err != nil {
		t.Fatalf("an empty directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
		t.Errorf("the adopted directory carries no marker: %v", err)
	}
}

// TestDemoStreams runs the streaming demo for six seconds: its last lines
// say verify passed for both indexes, both indexes indexed every commit of
// the stream (pk from the table, by_customer from the change events), the
// daemon turned equality deletes into deletion vectors, and with stdout not
// a terminal the progress comes as plain lines without cursor movement.
func TestDemoStreams(t *testing.T) {
	// The demo sets the range files' target size for its commands when
	// unset; restored after the test so that other tests get their own.
	t.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "64KiB")
	dir := filepath.Join(t.TempDir(), "streamidx-demo")
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--dir", dir, "--rows", "3000", "--upserts", "50", "--duration", "6s", "--log-level", "warn"}, &out, &errb)
	text := out.String()
	if code != exitOK {
		t.Fatalf("demo: exit %d\n%s%s", code, text, errb.String())
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if n := len(lines); n < 2 || !strings.HasPrefix(lines[n-2], "verify passed for pk: exact") ||
		!strings.HasPrefix(lines[n-1], "verify passed for by_customer: exact") {
		t.Fatalf("the demo's last lines should say verify passed for each index:\n%s", text)
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("stdout is not a terminal, yet the demo moved the cursor:\n%q", text)
	}
	// The last progress line of each index: every one of the 5 commits.
	for _, index := range []string{"pk", "by_customer"} {
		re := regexp.MustCompile(`(?m)^\[caught up\] ` + index + `: (\d+) of (\d+) commits indexed, lag p50 [0-9.]+s p99 [0-9.]+s, 3000 entries`)
		all := re.FindAllStringSubmatch(text, -1)
		if len(all) == 0 {
			t.Fatalf("no progress line for %s:\n%s", index, text)
		}
		last := all[len(all)-1]
		// Up to 6 commits: the stream ends after --duration, however long
		// its commits took.
		if n, _ := strconv.Atoi(last[2]); last[1] != last[2] || n < 3 || n > 6 {
			t.Errorf("%s indexed %s of %s commits at the end, want all of 3 to 6:\n%s", index, last[1], last[2], text)
		}
	}
	m := regexp.MustCompile(`equality deletes converted into deletion vectors: (\d+) delete files \((\d+) row positions\)`).FindAllStringSubmatch(text, -1)
	if len(m) == 0 {
		t.Fatalf("no line about converted deletes:\n%s", text)
	}
	files, _ := strconv.Atoi(m[len(m)-1][1])
	positions, _ := strconv.Atoi(m[len(m)-1][2])
	if files < 1 || positions < 50 {
		t.Errorf("converted %d equality delete files (%d positions), want some:\n%s", files, positions, text)
	}
	for _, want := range []string{"--explain", "streamidx inspect", "streamidx lookup", dir} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "daemon.log")); err != nil {
		t.Errorf("the daemon log: %v", err)
	}
}

// TestDemoVerifyReportsADifferentIndex: the demo's closing verify says
// FAILED for an index whose range file is broken, with verify's report,
// which makes the demo exit 1.
func TestDemoVerifyReportsADifferentIndex(t *testing.T) {
	warehouse, tbl := ordersTable(t, 40)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	ctx := context.Background()
	e, err := openEnv(ctx, &globals{catalogURI: "sqlite://" + filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db"),
		warehouse: warehouse, logLevel: "warn", stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	id := table.Identifier{"test", "orders"}
	md, _, err := e.indexes.Load(ctx, id, "pk")
	if err != nil {
		t.Fatal(err)
	}
	files, err := objstore.Local().Walk(ctx, objstore.Join(md.Location, "data"))
	if err != nil || len(files) == 0 {
		t.Fatalf("range files: %v %v", files, err)
	}
	if err := os.WriteFile(strings.TrimPrefix(files[0].Location, "file://"), []byte("not a range file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tbl, err = e.cat.LoadTable(ctx, id); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	verdict, ok, err := demoVerify(ctx, e, tbl, id, "pk", &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.HasPrefix(verdict, "verify FAILED for pk") || !strings.Contains(out.String(), "DIFFERENT") {
		t.Errorf("a broken index: ok %v, verdict %q, report:\n%s", ok, verdict, out.String())
	}
}
