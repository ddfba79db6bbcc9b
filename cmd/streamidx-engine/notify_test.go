package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestNotifyMovesTheDaemon: `streamidx notify` after a commit sends the
// notification the daemon follows (its poll interval is an hour, so only
// the notification can move the index), keyed by the table, with the
// offsets given; offsets that are not a JSON object are refused before
// anything is sent.
func TestNotifyMovesTheDaemon(t *testing.T) {
	cluster, brokers := commitCluster(t, 2)
	warehouse, tbl := ordersTable(t, 40)
	current := func() int64 { return tbl.CurrentSnapshot().SnapshotID }
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	startDaemon(t, c, "--table", "test.orders", "--index", "pk", "--kafka-brokers", brokers, "--poll-interval", "1h",
		"--http", testAddr(t), "--stage-dir", t.TempDir())
	waitAligned(t, c, "pk", current)

	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(40, 60, 0)...)
	if code, out, errOut := c.run("notify", "--table", "test.orders", "--kafka-brokers", brokers, "--offsets", `[1, 2]`); code == 0 ||
		!strings.Contains(errOut, "offsets") {
		t.Fatalf("notify with offsets that are not an object: exit %d\n%s%s", code, out, errOut)
	}
	out := c.ok("notify", "--table", "test.orders", "--kafka-brokers", brokers, "--offsets", `{"orders-cdc":{"0":7}}`)
	if !strings.Contains(out, "notified snapshot") || !strings.Contains(out, "streamidx-commits/") {
		t.Errorf("notify printed %q", out)
	}
	waitAligned(t, c, "pk", current)
	var cur inspectOutput
	_ = json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "pk", "--json")), &cur)
	if got := cur.Snapshots[len(cur.Snapshots)-1].Properties[daemon.PropSourceOffsets]; got != `{"orders-cdc":{"0":7}}` {
		t.Errorf("the index snapshot records source offsets %q", got)
	}

	// One record was sent, keyed by the table.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("streamidx-commits"))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < 1 && ctx.Err() == nil {
		recs = append(recs, consumer.PollFetches(ctx).Records()...)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records on the commit topic, want 1", len(recs))
	}
	if string(recs[0].Key) != "test.orders" {
		t.Errorf("the notification's key is %q, want the table's name", recs[0].Key)
	}
}

// TestEmbeddedBrokerIgnoresKafkaSecurity: run.kafka.tls and run.kafka.sasl
// configured for the production brokers do not stop a daemon started with
// --embedded-kafka, whose broker speaks plain Kafka: a notification sent
// to it moves the index.
func TestEmbeddedBrokerIgnoresKafkaSecurity(t *testing.T) {
	warehouse, tbl := ordersTable(t, 20)
	current := func() int64 { return tbl.CurrentSnapshot().SnapshotID }
	c := newCLI(t, warehouse, "run:\n  kafka:\n    tls: {enabled: true}\n    sasl: {mechanism: PLAIN, username: u, password: p}\n")
	createIndex(t, c, "pk")
	broker := testAddr(t)
	startDaemon(t, c, "--table", "test.orders", "--index", "pk", "--embedded-kafka", broker, "--poll-interval", "1h",
		"--http", testAddr(t), "--stage-dir", t.TempDir())
	waitAligned(t, c, "pk", current)
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(20, 30, 0)...)
	// notify reads the same configuration: it is told to skip TLS and SASL
	// by giving the embedded broker's plain address in a config of its own.
	plain := filepath.Join(t.TempDir(), "plain.yaml")
	if err := os.WriteFile(plain, []byte("build:\n  progress: never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("notify", "--config", plain, "--table", "test.orders", "--kafka-brokers", broker)
	waitAligned(t, c, "pk", current)
}
