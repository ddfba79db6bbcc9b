package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
)

// wideSchema is a CDC table of about 1 KB per row in Debezium JSON: a key,
// a customer, and the text, numbers and timestamps an order row carries.
func wideSchema() *iceberg.Schema {
	fields := []iceberg.NestedField{
		{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64},
		{ID: 3, Name: "status", Type: iceberg.PrimitiveTypes.String},
		{ID: 4, Name: "total", Type: iceberg.DecimalTypeOf(12, 2)},
		{ID: 5, Name: "created_at", Type: iceberg.PrimitiveTypes.TimestampTz},
		{ID: 6, Name: "updated_at", Type: iceberg.PrimitiveTypes.TimestampTz},
	}
	for i := range 12 {
		fields = append(fields, iceberg.NestedField{ID: 7 + i, Name: fmt.Sprintf("text_%d", i), Type: iceberg.PrimitiveTypes.String})
	}
	for i := range 6 {
		fields = append(fields, iceberg.NestedField{ID: 19 + i, Name: fmt.Sprintf("qty_%d", i), Type: iceberg.PrimitiveTypes.Int64})
	}
	return iceberg.NewSchema(0, fields...)
}

// wideEvent is the Debezium JSON event (schemas disabled) of inserting row
// id.
func wideEvent(id int64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"before":null,"after":{"id":%d,"customer_id":%d,"status":"shipped","total":"AeJA","created_at":%d,"updated_at":%d`,
		id, id*7919%100_000, 1764400000000000+id, 1764400000000000+id*3)
	for i := range 12 {
		fmt.Fprintf(&b, `,"text_%d":"line %d of order %d, never read by the index"`, i, i, id)
	}
	for i := range 6 {
		fmt.Fprintf(&b, `,"qty_%d":%d`, i, id%97+int64(i))
	}
	fmt.Fprintf(&b, `},"source":{"version":"2.7.0.Final","connector":"postgresql","name":"shop","ts_ms":1764400000000,"snapshot":"false",`+
		`"db":"shop","sequence":"[\"1234\",\"5678\"]","schema":"public","table":"orders","txId":%d,"lsn":%d,"xmin":null},`+
		`"op":"c","ts_ms":1764400000123,"transaction":null}`, id/10, id*64)
	return []byte(b.String())
}

// BenchmarkChangeFeedDebezium measures the change feed from a Kafka topic
// (kfake, in process, two partitions) of Debezium JSON events of about 1 KB
// into staging for one events-fed index: decoded on every core, staged in
// Pebble. STREAMIDX_BENCH_EVENTS sets the number of events (default
// 200,000). Reports events/s and MB/s.
func BenchmarkChangeFeedDebezium(b *testing.B) {
	n := int64(200_000)
	if v, err := strconv.ParseInt(os.Getenv("STREAMIDX_BENCH_EVENTS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	cat, warehouse := testtables.NewCatalog(b)
	tbl := testtables.CreateTable(b, cat, testtables.TableConfig{Name: "orders", Schema: wideSchema(), FormatVersion: 2})
	dir := strings.TrimPrefix(warehouse, "file://")
	db, err := indexcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ic, err := indexcatalog.NewSQL(context.Background(), db, indexcatalog.DialectSQLite, "default")
	if err != nil {
		b.Fatal(err)
	}
	def, _ := indexdef.Parse([]byte(`{"name":"by_customer","source":"events","identity":["customer_id","id"],"cluster":["bucket(16, customer_id)","customer_id","id"]}`))
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), tbl.Location()+"/indexes/by_customer")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ic.Create(context.Background(), tbl.Identifier(), "by_customer", md); err != nil {
		b.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.SeedTopics(2, "orders-cdc"), kfake.SeedTopics(1, commitTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for id := range n {
		v := wideEvent(id)
		bytes += int64(len(v))
		producer.Produce(context.Background(), &kgo.Record{Topic: "orders-cdc", Key: []byte(strconv.FormatInt(id, 10)), Value: v}, nil)
	}
	if err := producer.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	producer.Close()
	b.Logf("%d events, %.0f bytes each on average", n, float64(bytes)/float64(n))

	cfg := config.Default()
	cfg.Catalog.URI = "sqlite://" + filepath.Join(dir, "catalog.db")
	cfg.Catalog.Warehouse = warehouse
	cfg.Run.HTTP = ""
	cfg.Run.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Run.Kafka.ChangeTopics = []string{"orders-cdc=test.orders"}
	cfg.Run.Indexes = []config.IndexRef{{Table: "test.orders", Index: "by_customer"}}
	if err := cfg.EnsureDefaults(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		cfg.Run.StageDir = b.TempDir()
		d, err := New(cat, ic, nil, cfg, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		m, err := d.MeasureChangeFeed(context.Background(), n)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(m.Events)/m.Took.Seconds(), "events/s")
		b.ReportMetric(float64(m.Bytes)/m.Took.Seconds()/1e6, "MB/s")
		b.StartTimer()
	}
}
