// Package workload generates the synthetic orders table that the demo, the
// benchmarks and the measurements of the issues use: a CDC-shaped table
// keyed by order_id, with a skewed customer_id, text, amounts and
// timestamps, generated deterministically from a seed, batch by batch, so
// tables far larger than memory can be written.
package workload

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Schema is the schema of the synthetic orders table: keyed by order_id,
// with the columns a CDC-shaped table has. It differs from the edge-value
// fixture testtables.OrdersSchema, which tests use.
var Schema = iceberg.NewSchemaWithIdentifiers(0, []int{1},
	iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 3, Name: "status", Type: iceberg.PrimitiveTypes.String},
	iceberg.NestedField{ID: 4, Name: "total_cents", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 5, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	iceberg.NestedField{ID: 6, Name: "note", Type: iceberg.PrimitiveTypes.String},
)

var statuses = []string{"new", "paid", "packed", "shipped", "delivered", "returned"}

// Epoch is the timestamp of order 0; order i is placed i seconds later.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Customers is the number of distinct customers.
const Customers = 1_000_000

// Order returns the values of order id in its version v (v > 0 are updates),
// in Schema order.
func Order(id int64, version int, seed uint64) []any {
	r := rand.New(rand.NewPCG(seed^uint64(id)*0x9E3779B97F4A7C15, uint64(version)))
	// a skewed customer distribution: a few customers place many orders
	customer := int64(r.ExpFloat64()*Customers/8) % Customers
	var note any = fmt.Sprintf("order %d for customer %d", id, customer)
	if r.IntN(10) == 0 {
		note = nil
	}
	return []any{
		id,
		customer,
		statuses[min(version, len(statuses)-1)],
		int64(r.IntN(100_000)) + int64(version),
		Epoch.Add(time.Duration(id) * time.Second).UnixMicro(),
		note,
	}
}

// Batches yields record batches of orders [from, to) in version v, batch
// rows at a time, in Schema's Arrow form (with field IDs). Each batch
// belongs to the consumer, which releases it (array.ReaderFromIter does).
func Batches(mem memory.Allocator, ids func(i int64) int64, from, to int64, version int, seed uint64, batch int) (*arrow.Schema, iter.Seq2[arrow.RecordBatch, error]) {
	sc, err := table.SchemaToArrowSchema(Schema, nil, true, false)
	if err != nil {
		return nil, func(yield func(arrow.RecordBatch, error) bool) { yield(nil, err) }
	}
	return sc, func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		id := b.Field(0).(*array.Int64Builder)
		cust := b.Field(1).(*array.Int64Builder)
		status := b.Field(2).(*array.StringBuilder)
		total := b.Field(3).(*array.Int64Builder)
		ts := b.Field(4).(*array.TimestampBuilder)
		note := b.Field(5).(*array.StringBuilder)
		for start := from; start < to; start += int64(batch) {
			end := min(start+int64(batch), to)
			for i := start; i < end; i++ {
				o := Order(ids(i), version, seed)
				id.Append(o[0].(int64))
				cust.Append(o[1].(int64))
				status.Append(o[2].(string))
				total.Append(o[3].(int64))
				ts.Append(arrow.Timestamp(o[4].(int64)))
				if o[5] == nil {
					note.AppendNull()
				} else {
					note.Append(o[5].(string))
				}
			}
			if !yield(b.NewRecordBatch(), nil) {
				return
			}
		}
	}
}

// Sequential numbers orders 0, 1, 2, ...
func Sequential(i int64) int64 { return i }

// CreateOrders creates namespace and table when missing and returns the table.
func CreateOrders(ctx context.Context, cat catalog.Catalog, ident table.Identifier, formatVersion int) (*table.Table, error) {
	ns := ident[:len(ident)-1]
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %v: %w", ns, err)
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("load table %v: %w", ident, err)
	}
	props := iceberg.Properties{table.PropertyFormatVersion: fmt.Sprint(formatVersion)}
	tbl, err = cat.CreateTable(ctx, ident, Schema, catalog.WithProperties(props))
	if err != nil {
		return nil, fmt.Errorf("create table %v: %w", ident, err)
	}
	return tbl, nil
}

// Append commits orders [from, to) in version v as one snapshot.
func Append(ctx context.Context, tbl *table.Table, from, to int64, version int, seed uint64) (*table.Table, error) {
	sc, batches := Batches(memory.DefaultAllocator, Sequential, from, to, version, seed, 64*1024)
	rdr := array.ReaderFromIter(sc, batches)
	defer rdr.Release()
	tx := tbl.NewTransaction()
	if err := tx.Append(ctx, rdr, nil); err != nil {
		return nil, fmt.Errorf("append orders %d..%d: %w", from, to, err)
	}
	out, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit orders %d..%d: %w", from, to, err)
	}
	return out, nil
}

// Upsert commits, in one snapshot, an equality delete of the given order
// ids (on order_id) and their new version: the shape of a CDC upsert.
func Upsert(ctx context.Context, tbl *table.Table, ids []int64, version int, seed uint64) (*table.Table, error) {
	mem := memory.DefaultAllocator
	keySchema := arrow.NewSchema([]arrow.Field{{Name: "order_id", Type: arrow.PrimitiveTypes.Int64,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"1"})}}, nil)
	kb := array.NewInt64Builder(mem)
	kb.AppendValues(ids, nil)
	keys := kb.NewArray()
	kb.Release()
	keyRec := array.NewRecordBatch(keySchema, []arrow.Array{keys}, int64(len(ids)))
	keys.Release()
	defer keyRec.Release()
	tx := tbl.NewTransaction()
	deletes, err := tx.WriteEqualityDeletes(ctx, []int{1}, func(yield func(arrow.RecordBatch, error) bool) { yield(keyRec, nil) })
	if err != nil {
		return nil, fmt.Errorf("write equality deletes: %w", err)
	}
	sc, batches := Batches(mem, func(i int64) int64 { return ids[i] }, 0, int64(len(ids)), version, seed, 64*1024)
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, batches) {
		if err != nil {
			return nil, fmt.Errorf("write upserted rows: %w", err)
		}
		files = append(files, df)
	}
	if err := tx.NewRowDelta(nil).AddRows(files...).AddDeletes(deletes...).Commit(ctx); err != nil {
		return nil, fmt.Errorf("stage upsert: %w", err)
	}
	out, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit upsert: %w", err)
	}
	return out, nil
}

// UpsertIDs picks n existing order ids among [0, rows): at the tail of the
// key range, or spread uniformly. Asking for more than rows upserts every
// order once; an upsert of no orders, or of a table without orders, is an
// error.
func UpsertIDs(rows, n int64, pattern string, seed uint64) ([]int64, error) {
	if n < 1 {
		return nil, fmt.Errorf("upsert %d orders: want at least 1", n)
	}
	if rows < 1 {
		return nil, fmt.Errorf("upsert %d orders among %d: there are no orders to upsert (the ids are taken from [0, rows))", n, rows)
	}
	n = min(n, rows)
	ids := make([]int64, 0, n)
	switch pattern {
	case "tail":
		for i := rows - n; i < rows; i++ {
			ids = append(ids, i)
		}
	case "uniform":
		step := rows / n
		r := rand.New(rand.NewPCG(seed, 99))
		for i := range n {
			ids = append(ids, i*step+r.Int64N(step))
		}
	default:
		return nil, fmt.Errorf("pattern %q: want tail or uniform", pattern)
	}
	return ids, nil
}
