package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestVerifyExitCodeForBrokenFiles: verify exits 1 (DIFFERENT, naming the
// file) whenever a file of the index is not what the index says, whichever
// file it is and however it broke: missing, truncated or replaced by
// garbage. Exit 2 is kept for what stops verify from judging.
func TestVerifyExitCodeForBrokenFiles(t *testing.T) {
	breakFile := map[string]func(path string) error{
		"missing":   os.Remove,
		"truncated": func(p string) error { return os.Truncate(p, 10) },
		"garbage":   func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("not an index file ", 50)), 0o644) },
	}
	for _, which := range []string{"tracking file", "range file"} {
		for how, fn := range breakFile {
			t.Run(which+"/"+how, func(t *testing.T) {
				cat, warehouse := testtables.NewCatalog(t)
				tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
				testtables.Append(t, tbl, testtables.OrderRows(0, 40, 0)...)
				c := newCLI(t, warehouse, "")
				createIndexes(t, c, "test.orders")
				c.ok("build", "--table", "test.orders", "--index", "pk")
				md, _, err := openIndexCatalog(t, warehouse).Load(context.Background(), []string{"test", "orders"}, "pk")
				if err != nil {
					t.Fatal(err)
				}
				victim := md.CurrentSnapshot().TrackingFile
				if which == "range file" {
					files, err := objstore.Local().Walk(context.Background(), objstore.Join(md.Location, "data"))
					if err != nil || len(files) == 0 {
						t.Fatalf("range files: %v %v", files, err)
					}
					victim = files[0].Location
				}
				if err := fn(strings.TrimPrefix(victim, "file://")); err != nil {
					t.Fatal(err)
				}
				code, out, errs := c.run("verify", "--table", "test.orders", "--index", "pk")
				if code != exitDifferent || !strings.Contains(out, "DIFFERENT") || !strings.Contains(out, strings.TrimPrefix(victim, "file://")) {
					t.Errorf("verify with a %s %s: exit %d, want %d naming the file\n%s%s", how, which, code, exitDifferent, out, errs)
				}
			})
		}
	}
}
