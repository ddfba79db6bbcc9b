package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestCrashAnywhere kills the daemon with SIGKILL at random moments while
// commits stream in, over 20 trials. After a final restart every index
// snapshot must verify, the index must catch up with the last source
// snapshot, and every source snapshot must have exactly one index snapshot:
// nothing lost, nothing applied twice.
func TestCrashAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials take a while; run without -short")
	}
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 60, 0)...)
	c := newCLI(t, warehouse, "run:\n  retain-snapshots: 1000\n")
	createIndexes(t, c, "test.orders")
	stageDir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	start := func() *exec.Cmd { return startDaemonProcess(t, c, stageDir) }
	next := 60
	for trial := range 20 {
		cmd := start()
		for range 1 + r.IntN(3) {
			switch r.IntN(3) {
			case 0:
				tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(next, next+5, trial)...)
				next += 5
			case 1:
				tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(r.IntN(next))})
			default:
				del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(r.IntN(next))})
				tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(next, trial))
				next++
			}
		}
		time.Sleep(time.Duration(r.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	// The last run: it must catch up.
	cmd := start()
	defer func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }()
	checkHistory(t, c, tbl)
}

// startDaemonProcess starts `streamidx run` (this test binary acting as the
// command) for pk and by_customer, polling every 20ms, plus extra flags.
func startDaemonProcess(t *testing.T, c *cli, stageDir string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"run"}, c.base...)
	args = append(args, "--table", "test.orders", "--index", "pk", "--table", "test.orders", "--index", "by_customer",
		"--poll-interval", "20ms", "--http", "none", "--stage-dir", stageDir)
	args = append(args, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STREAMIDX_TEST_AS_COMMAND=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// checkHistory waits until both indexes cover the table's current snapshot,
// then checks that every index snapshot verifies and that every source
// snapshot from the first indexed one on has exactly one index snapshot.
func checkHistory(t *testing.T, c *cli, tbl *table.Table) {
	t.Helper()
	want := tbl.CurrentSnapshot().SnapshotID
	var all []int64 // every snapshot of the table, all in one line of history
	for _, s := range tbl.Metadata().Snapshots() {
		all = append(all, s.SnapshotID)
	}
	for _, index := range []string{"pk", "by_customer"} {
		deadline := time.Now().Add(2 * time.Minute)
		var o inspectOutput
		for {
			_ = json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", index, "--json")), &o)
			if n := len(o.Snapshots); n > 0 && o.Snapshots[n-1].SourceTableSnapshotID == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("index %s did not catch up", index)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The first build indexes whatever snapshot is current when a
		// daemon first starts; from there on, every source snapshot counts.
		first := 0
		for i, src := range all {
			if src == o.Snapshots[0].SourceTableSnapshotID {
				first = i
			}
		}
		sources := all[first:]
		perSource := map[int64]int{}
		for _, s := range o.Snapshots {
			perSource[s.SourceTableSnapshotID]++
			if code, out, errs := c.run("verify", "--table", "test.orders", "--index", index, "--snapshot", fmt.Sprint(s.SnapshotID)); code != 0 {
				t.Errorf("index %s snapshot %d (source %d) does not verify: %d\n%s%s", index, s.SnapshotID, s.SourceTableSnapshotID, code, out, errs)
			}
		}
		for _, src := range sources {
			if perSource[src] != 1 {
				t.Errorf("index %s: source snapshot %d has %d index snapshots, want 1", index, src, perSource[src])
			}
		}
		if len(o.Snapshots) != len(sources) {
			t.Errorf("index %s has %d snapshots for %d source snapshots", index, len(o.Snapshots), len(sources))
		}
	}
}

// TestTwoDaemonsOneIndex runs two daemons on the same indexes and the same
// commit topic while commits stream in: the compare-and-swap decides,
// nothing is lost or doubled.
func TestTwoDaemonsOneIndex(t *testing.T) {
	cluster, _ := commitCluster(t, 2)
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 60, 0)...)
	c := newCLI(t, warehouse, "run:\n  retain-snapshots: 1000\n")
	createIndexes(t, c, "test.orders")
	for _, dir := range []string{t.TempDir(), t.TempDir()} {
		cmd := startDaemonProcess(t, c, dir, "--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","))
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 15 {
		if i%3 == 2 {
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(r.IntN(60 + i*4))})
		} else {
			tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(60+i*4, 64+i*4, i)...)
		}
		s := tbl.CurrentSnapshot()
		v := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d,"sequence-number":%d}`, s.SnapshotID, s.SequenceNumber)
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "streamidx-commits", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
	}
	checkHistory(t, c, tbl)
}
