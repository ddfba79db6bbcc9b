package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrittenPathsAreURIs: with a warehouse given as a plain path, the
// table's location has no scheme; the index location and every path
// streamidx writes under it are still full URIs, since the table spec
// reads a path without a scheme as relative.
func TestWrittenPathsAreURIs(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--catalog-uri", "sqlite://" + filepath.Join(dir, "catalog.db"), "--warehouse", filepath.Join(dir, "warehouse"), "--log-level", "warn"}
	runCmd := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append(append([]string{args[0]}, base...), args[1:]...), &out, &errb); code != 0 {
			t.Fatalf("streamidx %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String()
	}
	runCmd("gen-table", "--table", "demo.orders", "--rows", "100")
	def := filepath.Join(dir, "pk.yaml")
	if err := os.WriteFile(def, []byte("name: pk\nidentity: [order_id]\nmaterialized: [_file, _pos]\ncluster: [order_id]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCmd("create", "--table", "demo.orders", "--def", def)
	runCmd("build", "--table", "demo.orders", "--index", "pk")
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
