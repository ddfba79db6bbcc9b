package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
)

const commitTopic = "streamidx-commits"

var definitions = map[string]string{
	"pk":          `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	"by_customer": `{"name":"by_customer","identity":["customer_id","id"],"materialized":["_file","_pos","name"],"cluster":["bucket(4, customer_id)","customer_id","id"]}`,
	// Events-fed indexes (events_test.go).
	"ev_customer": `{"name":"ev_customer","source":"events","identity":["customer_id","id"],"materialized":["score","amount"],"cluster":["bucket(4, customer_id)","customer_id","id"]}`,
	"ev_name":     `{"name":"ev_name","source":"events","identity":["name","id"],"materialized":["ts"],"non-materialized":["day(ts)"],"cluster":["truncate(2, name)","name","id"]}`,
}

// harness is a table with indexes, a daemon configuration for them and,
// when asked for, an in-process Kafka broker with the commit topic.
type harness struct {
	t       *testing.T
	cat     catalog.Catalog
	indexes indexcatalog.Catalog
	tbl     *table.Table // as last committed
	cfg     config.Config
	logs    *syncBuffer

	cluster  *kfake.Cluster
	producer *kgo.Client
}

// newHarness creates test.orders with 50 rows and the named indexes, and a
// configuration that keeps them: small range files, a fresh staging
// directory, an HTTP server on a free port, polling every hour (so only
// notifications move the indexes) unless changed. With partitions > 0 a
// kfake broker serves the commit topic with that many partitions.
func newHarness(t *testing.T, partitions int, indexNames ...string) *harness {
	t.Helper()
	return newHarnessOf(t, 2, partitions, indexNames...)
}

// newHarnessOf is newHarness with a table of format version.
func newHarnessOf(t *testing.T, version, partitions int, indexNames ...string) *harness {
	t.Helper()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: version, RowGroupRows: 16})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 50, 0)...)
	ic := testtables.IndexCatalog(t, warehouse)
	h := &harness{t: t, cat: cat, indexes: ic, tbl: tbl, logs: &syncBuffer{}}
	h.cfg = config.Default()
	h.cfg.Catalog.URI = "sqlite://" + filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db")
	h.cfg.Catalog.Warehouse = warehouse
	h.cfg.Build.TargetFileSize = 2 << 10
	h.cfg.Build.RowGroupRows = 16
	h.cfg.Run.StageDir = t.TempDir()
	h.cfg.Run.HTTP = "127.0.0.1:0"
	h.cfg.Run.PollInterval = config.Duration(time.Hour)
	if err := h.cfg.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	for _, name := range indexNames {
		testtables.CreateIndexes(t, ic, tbl, definitions[name])
		h.cfg.Run.Indexes = append(h.cfg.Run.Indexes, config.IndexRef{Table: "test.orders", Index: name})
	}
	if partitions > 0 {
		var err error
		h.cluster, err = kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.SeedTopics(int32(partitions), commitTopic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.cluster.Close)
		h.producer, err = kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.producer.Close)
		h.cfg.Run.Kafka.Brokers = h.cluster.ListenAddrs()
	}
	return h
}

// running is a daemon started by harness.start.
type running struct {
	*Daemon
	reg  *prometheus.Registry
	done chan error
}

// start builds a daemon on the harness's configuration, lets prepare adjust
// it before it runs, and runs it until stop or the end of the test.
func (h *harness) start(prepare func(*Daemon)) *running {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(h.cat, h.indexes, nil, h.cfg, log, reg)
	if err != nil {
		h.t.Fatal(err)
	}
	if prepare != nil {
		prepare(d)
	}
	r := &running{Daemon: d, reg: reg, done: make(chan error, 1)}
	go func() { r.done <- d.Run(context.Background()) }()
	h.t.Cleanup(func() { r.stop(h.t) })
	return r
}

// stop closes the daemon and checks that Run ended without error.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Errorf("close daemon: %v", err)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	default: // stopped before
	}
}

// get fetches a path of the daemon's HTTP server.
func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// notify produces a native commit notification for snapshot id on
// partition and returns its offset.
func (h *harness) notify(id, seq int64, partition int32) int64 {
	h.t.Helper()
	v := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d,"sequence-number":%d,"offsets":{"orders-cdc":{"0":%d}}}`, id, seq, seq*10)
	res := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: commitTopic, Partition: partition, Value: []byte(v)})
	r, err := res.First()
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Offset
}

// commit appends rows n..n+4 and returns the new snapshot.
func (h *harness) commit(n int) *table.Snapshot {
	h.t.Helper()
	h.tbl, _ = testtables.Append(h.t, h.tbl, testtables.OrderRows(n, n+5, 1)...)
	return h.tbl.CurrentSnapshot()
}

// snapshots returns the index's snapshots, oldest first.
func (h *harness) snapshots(index string) []format.Snapshot {
	h.t.Helper()
	md, _, err := h.indexes.Load(context.Background(), h.tbl.Identifier(), index)
	if err != nil {
		h.t.Fatal(err)
	}
	return md.Snapshots
}

// indexed returns the source snapshot of the index's current snapshot.
func (h *harness) indexed(index string) int64 {
	h.t.Helper()
	s := h.snapshots(index)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].SourceTableSnapshotID
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIndexed waits until the index covers source snapshot id.
func (h *harness) waitIndexed(index string, id int64) {
	h.t.Helper()
	waitFor(h.t, fmt.Sprintf("index %s covers snapshot %d", index, id), func() bool { return h.indexed(index) == id })
}

// verifyAll checks every snapshot of the index against a full scan.
func (h *harness) verifyAll(index string) {
	h.t.Helper()
	ctx := context.Background()
	md, _, err := h.indexes.Load(ctx, h.tbl.Identifier(), index)
	if err != nil {
		h.t.Fatal(err)
	}
	tbl, err := h.cat.LoadTable(ctx, h.tbl.Identifier())
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range md.Snapshots {
		rep, err := verify.Verify(ctx, tbl, md, &md.Snapshots[i], verify.Options{})
		if err != nil {
			h.t.Fatalf("verify %s snapshot %d: %v", index, md.Snapshots[i].SnapshotID, err)
		}
		if !rep.Exact() {
			h.t.Fatalf("index %s snapshot %d is not exact:\n%s", index, md.Snapshots[i].SnapshotID, rep.Summary())
		}
	}
}

// committed returns the consumer group's committed offset of a partition
// of the commit topic: the next offset a restarted daemon reads; -1 when
// none is committed.
func (h *harness) committed(partition int32) int64 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = h.cfg.Run.Kafka.Group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = commitTopic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), h.producer)
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.GroupIDNotFound) {
		return -1 // the group has committed nothing yet
	}
	if err != nil {
		h.t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Partition == partition {
				return p.Offset
			}
		}
	}
	return -1
}

// deadLetters reads every record of the dead-letter topic.
func (h *harness) deadLetters() []*kgo.Record {
	h.t.Helper()
	return h.deadLettersOf(commitTopic + ".dlq")
}

// deadLettersOf reads every record of a dead-letter topic.
func (h *harness) deadLettersOf(topic string) []*kgo.Record {
	h.t.Helper()
	end := h.endOffset(topic)
	if end <= 0 {
		return nil
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < end {
		f := c.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("read %d of %d dead-letter records", len(out), end)
		}
		f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// endOffset is the number of records of topic: the sum over its
// partitions of the offset after the last record; 0 when the topic does not
// exist yet.
func (h *harness) endOffset(topic string) int64 {
	h.t.Helper()
	// A fresh client: the producer's metadata may not know a topic the
	// daemon created since.
	c, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...))
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, c)
	if err != nil {
		h.t.Fatal(err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, t := range mresp.Topics {
		if t.ErrorCode != 0 {
			return 0
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp = -1 // the end
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	if len(rt.Partitions) == 0 {
		return 0
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				h.t.Fatalf("list offsets of %s/%d: error %d", topic, p.Partition, p.ErrorCode)
			}
			n += p.Offset
		}
	}
	return n
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// syncBuffer is a log destination the test reads while the daemon writes.
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

// fakeClock is the clock of notification timeouts in tests: it moves only
// when the test moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var errNoMetric = errors.New("no such metric")

// metric returns the value of one sample of /metrics text, e.g.
// `streamidx_updater_halted{index="pk",table="test.orders"}`.
func metric(body, sample string) (string, error) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v, nil
		}
	}
	return "", errNoMetric
}
