package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
)

// cli runs the streamidx command line against one catalog.
type cli struct {
	t    *testing.T
	base []string
}

func newCLI(t *testing.T, warehouse string, extraConfig string) *cli {
	dir := strings.TrimPrefix(warehouse, "file://")
	cfg := filepath.Join(t.TempDir(), "streamidx.yaml")
	body := "build:\n  target-file-size: 2KiB\n  row-group-rows: 16\n  progress: never\n" + extraConfig
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return &cli{t: t, base: []string{"--config", cfg, "--catalog-uri", "sqlite://" + filepath.Join(dir, "catalog.db"), "--warehouse", warehouse, "--log-level", "warn"}}
}

func (c *cli) run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	full := append([]string{args[0]}, append(append([]string{}, c.base...), args[1:]...)...)
	code = run(full, &out, &errb)
	return code, out.String(), errb.String()
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	if code != 0 {
		c.t.Fatalf("streamidx %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// buildHistory writes a table through every kind of commit the index must
// follow, and returns the snapshot ids after each commit.
func buildHistory(t *testing.T, tbl *table.Table, formatVersion int) (*table.Table, []int64) {
	var snaps []int64
	note := func(tb *table.Table) *table.Table { snaps = append(snaps, tb.CurrentSnapshot().SnapshotID); return tb }
	tbl, f1 := testtables.Append(t, tbl, testtables.OrderRows(0, 60, 0)...)
	note(tbl)
	tbl, f2 := testtables.Append(t, tbl, testtables.OrderRows(60, 100, 0)...)
	note(tbl)
	if formatVersion >= 3 {
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 3, 5, 8)
		note(tbl)
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 9) // replaces the first DV of the file
		note(tbl)
	} else {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f1[0], Pos: []int64{3, 5, 8}})
		note(tbl)
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f2[0], Pos: []int64{0, 39}})
		note(tbl)
	}
	tbl = note(testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(10)}, []any{int64(11)}, []any{int64(70)}))
	// an upsert: delete id 12 and 71 and insert their new versions in one commit
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(12)}, []any{int64(71)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(12, 1), testtables.OrderRow(71, 1))
	note(tbl)
	// re-insert a key deleted earlier: the old equality delete must not hide it
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRow(10, 2))
	note(tbl)
	// equality delete on another column, at a later sequence number
	tbl = note(testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(3)}))
	// a rewrite replacing the second file with different rows
	tbl, _ = testtables.Rewrite(t, tbl, f2, testtables.OrderRows(60, 95, 3)...)
	note(tbl)
	return tbl, snaps
}

var definitions = map[string]string{
	"pk":          `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	"by_customer": `{"name":"by_customer","identity":["customer_id","id"],"materialized":["_file","_pos","name"],"non-materialized":["bucket(8, customer_id)"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`,
	"by_name":     `{"name":"by_name","identity":["name","id"],"cluster":["truncate(2, name)","name","id"]}`,
	"by_day":      `{"name":"by_day","identity":["ts","id"],"materialized":["score","_file","_pos"],"cluster":["day(ts)","ts","id"]}`,
	"by_score":    `{"name":"by_score","identity":["score","id"],"materialized":["amount"],"cluster":["score","id"]}`,
}

func createIndexes(t *testing.T, c *cli, tableName string) []string {
	dir := t.TempDir()
	var created []string
	for name, def := range definitions {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		c.ok("create", "--table", tableName, "--def", path)
		created = append(created, name)
	}
	return created
}

func TestBuildAndVerifyEveryDefinition(t *testing.T) {
	for _, fv := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			cat, warehouse := testtables.NewCatalog(t)
			tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: fv, RowGroupRows: 16})
			_, snaps := buildHistory(t, tbl, fv)
			c := newCLI(t, warehouse, "")
			created := createIndexes(t, c, "test.orders")
			list := c.ok("list", "--table", "test.orders")
			for _, n := range created {
				if !strings.Contains(list, n) {
					t.Errorf("list does not show %s:\n%s", n, list)
				}
			}
			for _, n := range created {
				out := c.ok("build", "--table", "test.orders", "--index", n)
				if !strings.Contains(out, "built index "+n) {
					t.Errorf("build output: %s", out)
				}
				code, vout, verr := c.run("verify", "--table", "test.orders", "--index", n)
				if code != 0 {
					t.Errorf("verify %s: exit %d\n%s%s", n, code, vout, verr)
				}
			}
			// An index of an older snapshot is exact for that snapshot.
			old := fmt.Sprint(snaps[4])
			c.ok("build", "--table", "test.orders", "--index", "pk", "--snapshot", old)
			if code, out, errs := c.run("verify", "--table", "test.orders", "--index", "pk", "--snapshot", old); code != 0 {
				t.Errorf("verify old snapshot: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

func TestInspectJSON(t *testing.T) {
	warehouse, _ := ordersTable(t, 300)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "by_customer")
	var out inspectOutput
	if err := json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "by_customer", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if out.MetadataLocation == "" || len(out.Snapshots) != 1 || out.Tracking == nil || out.Tracking.TrackingFile != out.Snapshots[0].TrackingFile {
		t.Fatalf("inspect --json: %+v", out)
	}
	if out.Tracking.Records != 300 || len(out.Tracking.RangeFiles) < 2 {
		t.Errorf("tracking: %d records in %d range files", out.Tracking.Records, len(out.Tracking.RangeFiles))
	}
	for i, rf := range out.Tracking.RangeFiles {
		if len(rf.GroupMax) != 3 || rf.RecordCount == 0 || rf.FileSizeInBytes == 0 {
			t.Errorf("range file %d: %+v", i, rf)
		}
	}
	if len(out.Fields) != 6 || out.Fields[0].Name != "customer_id" {
		t.Errorf("fields: %+v", out.Fields)
	}
	text := c.ok("inspect", "--table", "test.orders", "--index", "by_customer")
	for _, want := range []string{"by_customer", "bucket(8, customer_id)", "range files of snapshot", "GROUP MAX"} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, text)
		}
	}
}

func TestConcurrentBuildsBothCommit(t *testing.T) {
	warehouse, _ := ordersTable(t, 200)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = c.run("build", "--table", "test.orders", "--index", "pk")
		}()
	}
	wg.Wait()
	for i, code := range codes {
		if code != 0 {
			t.Errorf("build %d: exit %d", i, code)
		}
	}
	var out inspectOutput
	if err := json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "pk", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Snapshots) != len(codes) {
		t.Errorf("%d concurrent builds left %d snapshots: a commit was lost", len(codes), len(out.Snapshots))
	}
	if code, o, e := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Errorf("verify after concurrent builds: %d\n%s%s", code, o, e)
	}
}

// TestGlobalFlagsBeforeTheCommand: the global flags work before the
// command, as in git and kubectl, as well as after it, and those after it
// win.
func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	warehouse, tbl := ordersTable(t, 40)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	// before runs the command line with the global flags first.
	before := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append(append([]string{}, c.base...), args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := before("list", "--table", "test.orders"); code != 0 || !strings.Contains(out, "by_customer") {
		t.Fatalf("streamidx --config ... list: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := before("--log-level", "debug", "build", "--table", "test.orders", "--index", "pk")
	if code != 0 || !strings.Contains(out, "built index pk") {
		t.Fatalf("streamidx --log-level debug build: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "level=DEBUG") {
		t.Errorf("--log-level debug before the command did not take effect:\n%s", errs)
	}
	// The command's own --log-level wins over the one before it.
	if code, _, errs := before("--log-level", "debug", "list", "--table", "test.orders", "--log-level", "error"); code != 0 || strings.Contains(errs, "level=") {
		t.Errorf("--log-level error after the command should silence the log: exit %d\n%s", code, errs)
	}
	testtables.Append(t, tbl, testtables.OrderRows(40, 50, 0)...)
	code, out, errs = before("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	if code != 0 || !strings.Contains(out, "test.orders/pk: 1 index snapshots published") {
		t.Fatalf("streamidx --config ... run --once: exit %d\n%s%s", code, out, errs)
	}
	if vc, vo, ve := c.run("verify", "--table", "test.orders", "--index", "pk"); vc != 0 {
		t.Errorf("verify after run --once: %d\n%s%s", vc, vo, ve)
	}
	if code, _, errs := before("-h"); code != 0 || !strings.Contains(errs, "usage: streamidx [global flags] <command>") {
		t.Errorf("streamidx --config ... -h: exit %d\n%s", code, errs)
	}
	if code, _, _ := before(); code != exitError {
		t.Errorf("global flags without a command: exit %d, want %d", code, exitError)
	}
}
