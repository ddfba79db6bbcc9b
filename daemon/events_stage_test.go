package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// TestChangeFeedStagesEveryEventOnce: tens of thousands of Debezium events
// on two partitions, many fetches and batches (one committed while the
// stager fills the next), with tombstones among them, are staged once each: every partition's staged range ends after its last
// record, its staged mutations are one per event with no key twice, and
// the feed counts exactly the events.
func TestChangeFeedStagesEveryEventOnce(t *testing.T) {
	const n = 40_000
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: schema, FormatVersion: 2})
	dir := strings.TrimPrefix(warehouse, "file://")
	db, err := indexcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	ic, err := indexcatalog.NewSQL(ctx, db, indexcatalog.DialectSQLite, "default")
	if err != nil {
		t.Fatal(err)
	}
	def, err := indexdef.Parse([]byte(`{"name":"by_customer","source":"events","identity":["customer_id","id"],"cluster":["bucket(16, customer_id)","customer_id","id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), tbl.Location()+"/indexes/by_customer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ic.Create(ctx, tbl.Identifier(), "by_customer", md); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.SeedTopics(2, changeTopic), kfake.SeedTopics(1, commitTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		t.Fatal(err)
	}
	// Event i goes to partition i%2; every 1000th record of a partition is
	// a tombstone (a key with no value), which stages nothing.
	records := [2]int64{}
	events := [2]int64{}
	for id := range int64(n) {
		p := int32(id % 2)
		rec := &kgo.Record{Topic: changeTopic, Partition: p, Key: fmt.Appendf(nil, "%d", id)}
		if records[p]%1000 != 999 {
			rec.Value = fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"customer_id":%d,"note":"order %d"},"source":{"connector":"postgresql",`+
				`"db":"shop","schema":"public","table":"orders"},"op":"c","ts_ms":1764400000123}`, id, id*7919%5000, id)
			events[p]++
		}
		records[p]++
		producer.Produce(ctx, rec, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	producer.Close()

	cfg := config.Default()
	cfg.Catalog.URI = "sqlite://" + filepath.Join(dir, "catalog.db")
	cfg.Catalog.Warehouse = warehouse
	cfg.Run.HTTP = ""
	cfg.Run.StageDir = t.TempDir()
	cfg.Run.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Run.Kafka.ChangeTopics = []string{changeTopic + "=test.orders"}
	cfg.Run.Indexes = []config.IndexRef{{Table: "test.orders", Index: "by_customer"}}
	if err := cfg.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cat, ic, nil, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.MeasureChangeFeed(ctx, events[0]+events[1])
	if err != nil {
		t.Fatal(err)
	}
	if m.Events != events[0]+events[1] {
		t.Errorf("the feed counted %d events staged, want %d", m.Events, events[0]+events[1])
	}
	log := updater.EventLog(tbl.Identifier(), "by_customer")
	ranges, err := d.store.EventRanges(log)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		tp := staging.TopicPartition{Topic: changeTopic, Partition: p}
		if got := ranges[tp]; got != (staging.EventRange{From: 0, Through: records[p]}) {
			t.Errorf("staged range of %s is %+v, want [0, %d)", tp, got, records[p])
		}
		keys := map[string]bool{}
		if err := d.store.IterateEvents(log, tp, 0, records[p], func(k, _ []byte, count int) error {
			if count != 1 {
				return fmt.Errorf("a mutation of count %d, want 1", count)
			}
			if keys[string(k)] {
				return fmt.Errorf("entry key %x staged twice", k)
			}
			keys[string(k)] = true
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
		if int64(len(keys)) != events[p] {
			t.Errorf("%s: %d mutations staged, want %d", tp, len(keys), events[p])
		}
	}
}
