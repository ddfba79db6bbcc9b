package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/internal/testtables"
)

// startDaemon runs `streamidx run` in this process until the test ends.
func startDaemon(t *testing.T, c *cli, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fs := flag.NewFlagSet("streamidx run", flag.ContinueOnError)
	var stderr bytes.Buffer
	g := &globals{stderr: &stderr}
	g.register(fs)
	done := make(chan int, 1)
	go func() {
		code, err := runDaemon(ctx, g, fs, append(append([]string{}, c.base...), args...), io.Discard)
		if err != nil {
			t.Errorf("run: %v\n%s", err, stderr.String())
		}
		done <- code
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("streamidx run did not stop within 30s of its context ending")
			return -1
		}
	}
	t.Cleanup(func() { stop() })
	return stop
}

func testAddr(t *testing.T) string {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitAligned waits until the index's current snapshot is for the table's
// current snapshot, then verifies it.
func waitAligned(t *testing.T, c *cli, index string, current func() int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		code, out, _ := c.run("inspect", "--table", "test.orders", "--index", index, "--json")
		if code == 0 {
			var o inspectOutput
			if json.Unmarshal([]byte(out), &o) == nil && o.Tracking != nil && len(o.Snapshots) > 0 {
				last := o.Snapshots[len(o.Snapshots)-1].SourceTableSnapshotID
				if last == current() {
					if vc, vo, ve := c.run("verify", "--table", "test.orders", "--index", index); vc != 0 {
						t.Fatalf("verify after the daemon's update: %d\n%s%s", vc, vo, ve)
					}
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("index %s did not catch up within 60s", index)
}

func TestRunFollowsCommitNotifications(t *testing.T) {
	cluster, brokers := commitCluster(t, 1)

	warehouse, tbl := ordersTable(t, 50)
	current := func() int64 { return tbl.CurrentSnapshot().SnapshotID }
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	addr := testAddr(t)
	stop := startDaemon(t, c, "--table", "test.orders", "--index", "pk", "--table", "test.orders", "--index", "by_customer",
		"--kafka-brokers", brokers, "--poll-interval", "1h", "--http", addr, "--stage-dir", t.TempDir())
	waitAligned(t, c, "pk", current) // the first build happens at start

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	notify := func() {
		s := tbl.CurrentSnapshot()
		v := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d,"sequence-number":%d,"timestamp-ms":%d,"offsets":{"orders-cdc":{"0":%d}}}`,
			s.SnapshotID, s.SequenceNumber, s.TimestampMs, s.SequenceNumber*10)
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "streamidx-commits", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The poll interval is an hour: only notifications can move the index.
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(50, 80, 0)...)
	notify()
	waitAligned(t, c, "pk", current)
	waitAligned(t, c, "by_customer", current)
	older := tbl.CurrentSnapshot()
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(3)}, []any{int64(60)})
	notify()
	waitAligned(t, c, "pk", current)
	waitAligned(t, c, "by_customer", current)
	// The index snapshot records the feed positions it covers.
	var cur inspectOutput
	_ = json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "pk", "--json")), &cur)
	props := cur.Snapshots[len(cur.Snapshots)-1].Properties
	if want := fmt.Sprintf(`{"orders-cdc":{"0":%d}}`, tbl.CurrentSnapshot().SequenceNumber*10); props[daemon.PropSourceOffsets] != want ||
		!strings.HasPrefix(props[daemon.PropCommitNotification], "streamidx-commits/0/") {
		t.Errorf("index snapshot properties %v, want source offsets %s", props, want)
	}
	// Duplicates and late arrivals change nothing.
	notify()
	late := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d}`, older.SnapshotID)
	if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "streamidx-commits", Value: []byte(late)}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A record that is not a notification goes to the dead-letter topic.
	if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "streamidx-commits", Value: []byte(`{"table":"nope"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("streamidx-commits.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetches := consumer.PollRecords(ctx, 1)
	var reason string
	fetches.EachRecord(func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == "streamidx-error" {
				reason = string(h.Value)
			}
		}
	})
	if !strings.Contains(reason, "want namespace.table") {
		t.Errorf("dead-letter record reason %q", reason)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`streamidx_flush_commits_total{index="pk",table="test.orders"} 3`,
		`streamidx_ingest_notification_decode_errors_total 1`,
		`streamidx_compactor_range_files_reused_total`,
		`streamidx_flush_lag_seconds{index="pk",table="test.orders"}`,
		// the Go scheduler's histograms, which tell a stalled process
		`go_sched_latencies_seconds_bucket`,
		`go_sched_pauses_total_gc_seconds_bucket`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", p, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	var out inspectOutput
	_ = json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "pk", "--json")), &out)
	if n := len(out.Snapshots); n != 3 {
		t.Errorf("pk has %d snapshots, want 3 (build, append, delete)", n)
	}
	if code := stop(); code != 0 {
		t.Errorf("run exited %d on shutdown", code)
	}
}

func TestRunPollsWithoutKafka(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 3})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 40, 0)...)
	current := func() int64 { return tbl.CurrentSnapshot().SnapshotID }
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	startDaemon(t, c, "--table", "test.orders", "--index", "by_day", "--poll-interval", "100ms", "--http", "none", "--stage-dir", t.TempDir())
	waitAligned(t, c, "by_day", current)
	for i := range 3 {
		tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(40+i*10, 50+i*10, 0)...)
		waitAligned(t, c, "by_day", current)
	}
}

// commitCluster starts an in-process Kafka cluster (kfake) whose commit
// topic, streamidx-commits, has partitions partitions, with more options;
// it closes when the test ends. It returns the cluster and its brokers as
// --kafka-brokers takes them.
func commitCluster(t *testing.T, partitions int32, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.AllowAutoTopicCreation(), kfake.SeedTopics(partitions, "streamidx-commits")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster, strings.Join(cluster.ListenAddrs(), ",")
}

// ordersTable creates the table test.orders (format 2) in a new catalog
// and appends orders 0 to rows-1 in one commit; it returns the catalog's
// warehouse and the table after the commit.
func ordersTable(t *testing.T, rows int) (string, *table.Table) {
	t.Helper()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, rows, 0)...)
	return warehouse, tbl
}
