package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
)

// TestWrittenPathsAreURIs: with a warehouse given as a plain path, the
// index location and every path streamidx writes under it are full URIs,
// since the table spec reads a path without a scheme as relative.
func TestWrittenPathsAreURIs(t *testing.T) {
	dir := t.TempDir()
	runCmd := runWith(t, "--catalog-uri", "sqlite://"+filepath.Join(dir, "catalog.db"), "--warehouse", filepath.Join(dir, "warehouse"), "--log-level", "warn")
	buildOrdersPK(t, runCmd, dir)
	var got inspectOutput
	if err := json.Unmarshal([]byte(runCmd("inspect", "--table", "demo.orders", "--index", "pk", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	paths := []string{got.Location, got.MetadataLocation, got.Tracking.TrackingFile}
	for _, s := range got.Snapshots {
		paths = append(paths, s.TrackingFile)
	}
	for _, e := range got.MetadataLog {
		paths = append(paths, e.MetadataFile)
	}
	for _, rf := range got.Tracking.RangeFiles {
		paths = append(paths, rf.FilePath)
	}
	if len(paths) < 6 {
		t.Fatalf("inspect shows too few paths: %q", paths)
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "file:///") {
			t.Errorf("%q is not a file:// URI", p)
		}
	}
}

// TestDirectoriesWithReservedCharacters: a data directory whose name holds
// the characters a URI reserves ("#", "?", "%", a space) works the same
// whether the catalog and warehouse are given as URIs, the warehouse as a
// plain path, or left to the default under the working directory: every
// path streamidx writes parses back to a file inside that directory, a
// lookup answers and verify passes, and nothing lands beside it (a "#" read
// as a fragment once made "a" of "a#b").
func TestDirectoriesWithReservedCharacters(t *testing.T) {
	for _, form := range []string{"uris", "plain warehouse", "defaults"} {
		t.Run(form, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data #1 100%?x")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var base []string
			switch form {
			case "uris":
				base = []string{"--catalog-uri", config.SQLiteURI(filepath.Join(dir, "catalog.db")), "--warehouse", format.FileURI(filepath.Join(dir, "warehouse"))}
			case "plain warehouse":
				base = []string{"--catalog-uri", config.SQLiteURI(filepath.Join(dir, "catalog.db")), "--warehouse", filepath.Join(dir, "warehouse")}
			case "defaults":
				t.Chdir(dir)
			}
			runCmd := runWith(t, append(base, "--log-level", "warn")...)
			buildOrdersPK(t, runCmd, dir)
			got := lookUpVerifyInspect(t, runCmd, 42)
			paths := []string{got.Location, got.MetadataLocation, got.Tracking.TrackingFile}
			for _, rf := range got.Tracking.RangeFiles {
				paths = append(paths, rf.FilePath)
			}
			for _, p := range paths {
				u, err := url.Parse(p)
				if err != nil || u.Scheme != "file" || u.Fragment != "" || u.RawQuery != "" {
					t.Errorf("%q is not a file URI without fragment or query (%v)", p, err)
					continue
				}
				if !strings.HasPrefix(u.Path, dir+string(filepath.Separator)) {
					t.Errorf("%q names %q, outside %q", p, u.Path, dir)
				} else if _, err := os.Stat(u.Path); err != nil && p != got.Location {
					t.Errorf("%q: %v", p, err)
				}
			}
			if entries, err := os.ReadDir(parent); err != nil || len(entries) != 1 {
				t.Errorf("beside the data directory: %v (%v)", entries, err)
			}
		})
	}
}

// runWith returns a function that runs a streamidx command with the global
// flags base after its name and returns its stdout, failing the test on a
// non-zero exit.
func runWith(t *testing.T, base ...string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append(append([]string{args[0]}, base...), args[1:]...), &out, &errb); code != 0 {
			t.Fatalf("streamidx %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String()
	}
}

// buildOrdersPK writes a table demo.orders of 100 orders and builds a
// primary-key index pk on it, its definition written in dir.
func buildOrdersPK(t *testing.T, runCmd func(args ...string) string, dir string) {
	t.Helper()
	runCmd("gen-table", "--table", "demo.orders", "--rows", "100")
	def := filepath.Join(dir, "pk.yaml")
	if err := os.WriteFile(def, []byte("name: pk\nidentity: [order_id]\nmaterialized: [_file, _pos]\ncluster: [order_id]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCmd("create", "--table", "demo.orders", "--def", def)
	runCmd("build", "--table", "demo.orders", "--index", "pk")
}

// TestFSIndexCatalogAtItsOwnLocation: with catalog.index-location set (as
// a REST catalog whose warehouse is a name needs), the fs index catalog
// keeps every index there, and create, build, lookup and verify find it.
func TestFSIndexCatalogAtItsOwnLocation(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STREAMIDX_INDEX_CATALOG", "fs")
	t.Setenv("STREAMIDX_INDEX_LOCATION", filepath.Join(dir, "idx"))
	runCmd := runWith(t, "--catalog-uri", config.SQLiteURI(filepath.Join(dir, "catalog.db")), "--warehouse", filepath.Join(dir, "warehouse"), "--log-level", "warn")
	buildOrdersPK(t, runCmd, dir)
	got := lookUpVerifyInspect(t, runCmd, 7)
	if want := format.FileURI(filepath.Join(dir, "idx")) + "/"; !strings.HasPrefix(got.Location, want) || !strings.HasPrefix(got.MetadataLocation, want) {
		t.Errorf("index at %s (metadata %s), want under %s", got.Location, got.MetadataLocation, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "warehouse", "*", "*", "indexes")); len(m) != 0 {
		t.Errorf("index files under the warehouse too: %v", m)
	}
}

// lookUpVerifyInspect looks order id up through pk of demo.orders (it must
// come back), verifies the index and returns what inspect says of it.
func lookUpVerifyInspect(t *testing.T, runCmd func(args ...string) string, id int) inspectOutput {
	t.Helper()
	where := fmt.Sprintf("order_id = %d", id)
	if out := runCmd("lookup", "--table", "demo.orders", "--index", "pk", "--where", where, "--json"); !strings.Contains(out, fmt.Sprintf(`"order_id":%d`, id)) {
		t.Errorf("lookup of order %d did not return it:\n%s", id, out)
	}
	runCmd("verify", "--table", "demo.orders", "--index", "pk")
	var got inspectOutput
	if err := json.Unmarshal([]byte(runCmd("inspect", "--table", "demo.orders", "--index", "pk", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	return got
}
