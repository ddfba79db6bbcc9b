package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/kafkaconn"
	"github.com/streamidx/streamidx/internal/lineage"
)

func init() {
	register(command{name: "notify", summary: "send the commit notification of a table snapshot to the commit topic (for writers that cannot send it themselves)", run: runNotify})
}

// runNotify produces streamidx's native commit notification of a table
// snapshot (the current one by default) on the commit topic, through the
// brokers, TLS and SASL of run.kafka, for a batch job to call after its
// commit. The record's key is the table's name, so that the notifications
// of one table stay in one partition, in commit order.
func runNotify(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addTableFlags(fs, "table snapshot `id` (default: the current one)")
	offsets := fs.String("offsets", "", `change-topic offsets the commit covers, as JSON: {"TOPIC": {"PARTITION": NEXT_OFFSET}} (default: none)`)
	brokers := fs.String("kafka-brokers", "", "Kafka bootstrap `servers` host:port,... (default from run.kafka.brokers)")
	commitTopic := fs.String("commit-topic", "", "commit notification `topic` (default from run.kafka.commit-topic: streamidx-commits)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up when the brokers have not taken the record within this `duration`")
	if err := f.parseTable(fs, args); err != nil {
		return exitError, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	k := e.cfg.Run.Kafka
	if *brokers != "" {
		k.Brokers = strings.Split(*brokers, ",")
	}
	if *commitTopic != "" {
		k.CommitTopic = *commitTopic
	}
	if len(k.Brokers) == 0 {
		return exitError, fmt.Errorf("no Kafka brokers: give --kafka-brokers or run.kafka.brokers")
	}
	tbl, _, err := e.loadTable(ctx, f.table)
	if err != nil {
		return exitError, err
	}
	snap, err := lineage.Snapshot(tbl, f.snapshot)
	if err != nil {
		return exitError, err
	}
	n := ingest.Notification{Table: strings.Join(tbl.Identifier(), "."), SnapshotID: snap.SnapshotID,
		SequenceNumber: snap.SequenceNumber, TimestampMs: snap.TimestampMs}
	if *offsets != "" {
		n.Offsets = json.RawMessage(*offsets)
	}
	value, err := json.Marshal(n)
	if err != nil {
		return exitError, err
	}
	// What the daemon would refuse is refused here, before it is sent.
	if _, err := ingest.DecodeNotification(value); err != nil {
		return exitError, fmt.Errorf("--offsets: %w", err)
	}
	opts, err := kafkaconn.Options(k, e.log)
	if err != nil {
		return exitError, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return exitError, fmt.Errorf("connect to kafka %v: %w", k.Brokers, err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := cl.ProduceSync(pctx, &kgo.Record{Topic: k.CommitTopic, Key: []byte(n.Table), Value: value}).First()
	if err != nil {
		return exitError, fmt.Errorf("send the commit notification of %s snapshot %d to %s: %w", n.Table, n.SnapshotID, k.CommitTopic, err)
	}
	fmt.Fprintf(stdout, "notified snapshot %d of %s on %s/%d/%d\n", n.SnapshotID, n.Table, r.Topic, r.Partition, r.Offset)
	return exitOK, nil
}
