package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/testtables"
)

// eventDefinitions are the events-fed indexes of the crash test: one
// clustered by a bucket of a nullable column, one by a truncated string.
var eventDefinitions = map[string]string{
	"ev_customer": `{"name":"ev_customer","source":"events","identity":["customer_id","id"],"materialized":["score","amount"],"cluster":["bucket(4, customer_id)","customer_id","id"]}`,
	"ev_name":     `{"name":"ev_name","source":"events","identity":["name","id"],"materialized":["ts"],"cluster":["truncate(2, name)","name","id"]}`,
}

// TestEventsCrashAnywhere kills the daemon with SIGKILL at random moments,
// 12 times, while a CDC pipeline writes commits to the table, their change
// events to a two-partition change topic (Debezium with and without schema,
// native) and their commit notifications, in varying order. After a final
// restart both events-fed indexes catch up, every index snapshot verifies,
// and every source snapshot from the first indexed one has exactly one
// index snapshot: no event lost, none applied twice; and no run fell back
// to reading the table.
func TestEventsCrashAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials take a while; run without -short")
	}
	cluster, _ := commitCluster(t, 1, kfake.SeedTopics(2, "orders-cdc"))
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	cdc := testtables.NewCDC(21, "test.orders", nil)
	tbl, events := cdc.Commit(t, tbl, 40, testtables.Debezium)
	c := newCLI(t, warehouse, "run:\n  retain-snapshots: 1000\n")
	dir := t.TempDir()
	for name, def := range eventDefinitions {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		c.ok("create", "--table", "test.orders", "--def", path)
	}
	next := []int64{0, 0}
	write := func(evs []testtables.CDCEvent) {
		for _, ev := range evs {
			p := int32(ev.ID % 2)
			r, err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "orders-cdc", Partition: p, Key: ev.Key, Value: ev.Value}).First()
			if err != nil || r.Offset != next[p] {
				t.Fatalf("event at %d, want %d: %v", r.Offset, next[p], err)
			}
			next[p]++
		}
	}
	offsetsAfter := func(evs []testtables.CDCEvent) string {
		n := append([]int64{}, next...)
		for _, ev := range evs {
			n[ev.ID%2]++
		}
		return fmt.Sprintf(`{"orders-cdc":{"0":%d,"1":%d}}`, n[0], n[1])
	}
	notify := func(s *table.Snapshot, offsets string) {
		v := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d,"sequence-number":%d,"offsets":%s}`, s.SnapshotID, s.SequenceNumber, offsets)
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "streamidx-commits", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	notify(tbl.CurrentSnapshot(), offsetsAfter(events))
	write(events)

	stageDir := t.TempDir()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	var logs syncBuffer // every run's log (warnings and errors)
	start := func() *exec.Cmd {
		args := append([]string{"run"}, c.base...)
		args = append(args, "--table", "test.orders", "--index", "ev_customer", "--table", "test.orders", "--index", "ev_name",
			"--poll-interval", "20ms", "--http", "none", "--stage-dir", stageDir, "--kafka-brokers", brokers,
			"--change-topic", "orders-cdc=test.orders", "--log-level", "debug")
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "STREAMIDX_TEST_AS_COMMAND=1")
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	defer func() {
		if t.Failed() {
			t.Logf("daemon logs:\n%s", logs.String())
		}
	}()
	// The first run builds both indexes from the table at the first
	// snapshot; from there on, every source snapshot must be followed.
	cmd := start()
	waitIndexed(t, c, tbl.CurrentSnapshot().SnapshotID, "ev_customer", "ev_name")
	r := rand.New(rand.NewPCG(13, 14))
	forms := []testtables.EventForm{testtables.Debezium, testtables.DebeziumSchema, testtables.Native}
	for trial := range 12 {
		if trial > 0 {
			cmd = start()
		}
		for range 1 + r.IntN(3) {
			tbl, events = cdc.Commit(t, tbl, 1+r.IntN(10), forms[r.IntN(3)])
			offsets := offsetsAfter(events)
			if r.IntN(2) == 0 {
				write(events)
				notify(tbl.CurrentSnapshot(), offsets)
			} else {
				notify(tbl.CurrentSnapshot(), offsets)
				write(events)
			}
			time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
		}
		time.Sleep(time.Duration(200+r.IntN(1200)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		t.Logf("trial %d: killed", trial)
	}
	cmd = start()
	defer func() {
		if t.Failed() { // the goroutines of a daemon that did not catch up, in the logs
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	checkEventsHistory(t, c, tbl, "ev_customer", "ev_name")
	// No crash made the indexes fall back to reading the table.
	for _, fallback := range []string{"the events do not fit the index", "no longer staged", "skipped offsets"} {
		if strings.Contains(logs.String(), fallback) {
			t.Errorf("a daemon logged %q", fallback)
		}
	}
}

// waitIndexed waits until every index covers source snapshot id.
func waitIndexed(t *testing.T, c *cli, id int64, indexes ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, index := range indexes {
		for {
			var o inspectOutput
			_ = json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", index, "--json")), &o)
			if n := len(o.Snapshots); n > 0 && o.Snapshots[n-1].SourceTableSnapshotID == id {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("index %s did not reach source snapshot %d", index, id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// checkEventsHistory waits until the indexes cover the table's current
// snapshot, then checks that every index snapshot verifies and that every
// source snapshot has exactly one.
func checkEventsHistory(t *testing.T, c *cli, tbl *table.Table, indexes ...string) {
	t.Helper()
	want := tbl.CurrentSnapshot().SnapshotID
	var all []int64
	for _, s := range tbl.Metadata().Snapshots() {
		all = append(all, s.SnapshotID)
	}
	for _, index := range indexes {
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
		first := 0
		perSource := map[int64]int{}
		for _, s := range o.Snapshots {
			perSource[s.SourceTableSnapshotID]++
			if code, out, errs := c.run("verify", "--table", "test.orders", "--index", index, "--snapshot", strconv.FormatInt(s.SnapshotID, 10)); code != 0 {
				t.Errorf("index %s snapshot %d (source %d) does not verify: %d\n%s%s", index, s.SnapshotID, s.SourceTableSnapshotID, code, out, errs)
			}
		}
		for _, src := range all[first:] {
			if perSource[src] != 1 {
				t.Errorf("index %s: source snapshot %d has %d index snapshots, want 1", index, src, perSource[src])
			}
		}
		if len(o.Snapshots) != len(all)-first {
			t.Errorf("index %s has %d snapshots for %d source snapshots", index, len(o.Snapshots), len(all)-first)
		}
		t.Logf("index %s: %d index snapshots, all verified", index, len(o.Snapshots))
	}
}

// syncBuffer collects the output of child processes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
