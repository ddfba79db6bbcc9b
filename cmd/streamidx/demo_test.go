package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runDemoCommand(t *testing.T, dir string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--dir", dir, "--rows", "300", "--log-level", "warn"}, &out, &errb)
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
