package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/workload"
)

// The change-feed figure: Debezium JSON change events of the orders table
// in an in-process Kafka topic (two partitions), decoded and staged by the
// daemon's change feed for an events-fed index, alone (no workers).

const benchChangeTopic = "orders-cdc"

// benchEventsDefinition is an events-fed secondary index of the orders.
const benchEventsDefinition = `name: by_customer_events
source: events
identity: [customer_id, order_id]
materialized: [total_cents]
cluster: ["bucket(16, customer_id)", customer_id, order_id]
`

// benchEvent is the Debezium JSON create event of order id, with a source
// block as PostgreSQL's connector writes it.
func benchEvent(id int64) []byte {
	o := workload.Order(id, 0, 1) // ts in microseconds, as Debezium writes a timestamptz
	note, _ := json.Marshal(o[5]) // null for some orders
	return fmt.Appendf(nil, `{"before":null,"after":{"order_id":%d,"customer_id":%d,"status":%q,"total_cents":%d,"ts":%d,"note":%s},`+
		`"source":{"version":"2.7.0.Final","connector":"postgresql","name":"shop","ts_ms":1764400000000,"snapshot":"false","db":"shop",`+
		`"schema":"public","table":"orders","txId":%d,"lsn":%d},"op":"c","ts_ms":1764400000123,"transaction":null}`,
		o[0], o[1], o[2], o[3], o[4], note, id/10, id*64)
}

func benchEvents(ctx context.Context, b *bench) error {
	n := max(b.rows/5, 1000)
	dir := filepath.Join(b.dir, "work", "events")
	e, id, tbl, err := b.newOrdersTable(ctx, dir, 2)
	if err != nil {
		return err
	}
	defer e.Close()
	def, err := indexdef.Parse([]byte(benchEventsDefinition))
	if err != nil {
		return err
	}
	loc, err := e.indexLocation(tbl, id, def.Name)
	if err != nil {
		return err
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), loc)
	if err != nil {
		return err
	}
	if _, err := e.indexes.Create(ctx, id, def.Name, md); err != nil {
		return err
	}
	cluster, err := kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.SeedTopics(2, benchChangeTopic), kfake.SeedTopics(1, benchCommitTopic))
	if err != nil {
		return err
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	b.note("events: producing %d Debezium change events", n)
	var size int64
	for i := range n {
		v := benchEvent(i)
		size += int64(len(v))
		producer.Produce(ctx, &kgo.Record{Topic: benchChangeTopic, Key: []byte(strconv.FormatInt(i, 10)), Value: v}, nil)
	}
	err = producer.Flush(ctx)
	producer.Close()
	if err != nil {
		return fmt.Errorf("produce the change events: %w", err)
	}
	cfg := e.cfg
	cfg.Run.HTTP = ""
	cfg.Run.StageDir = filepath.Join(dir, "staging")
	cfg.Run.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Run.Kafka.CommitTopic = benchCommitTopic
	cfg.Run.Kafka.ChangeTopics = []string{benchChangeTopic + "=" + benchTable}
	cfg.Run.Indexes = []config.IndexRef{{Table: benchTable, Index: def.Name}}
	d, err := daemon.New(e.cat, e.indexes, e.store, cfg, b.log, nil)
	if err != nil {
		return err
	}
	b.note("events: decoding and staging them (%.0f bytes each)", float64(size)/float64(n))
	cpu0 := processCPU()
	m, err := d.MeasureChangeFeed(ctx, n)
	cpu := processCPU() - cpu0
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	rate := float64(m.Events) / m.Took.Seconds()
	perEvent := float64(cpu.Microseconds()) / float64(m.Events)
	b.note("events: %d staged in %s: %.0f events/s, %.2f µs of CPU each, %.2f cores", m.Events, m.Took.Round(time.Millisecond), rate,
		perEvent, cpu.Seconds()/m.Took.Seconds())
	b.add(figure{Name: "events.staged_per_s", Value: rate, Unit: "events/s", Goal: ">= 300000", Met: ptr(rate >= 300_000)})
	b.add(figure{Name: "events.mb_per_s", Value: float64(m.Bytes) / m.Took.Seconds() / 1e6, Unit: "MB/s"})
	// The CPU an event costs holds on a busy machine, where the rate does
	// not; it counts the in-process broker's share too.
	b.add(figure{Name: "events.cpu_per_event", Value: perEvent, Unit: "µs"})
	return nil
}

// processCPU is the user and system time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
