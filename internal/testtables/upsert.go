package testtables

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
)

// orderIDSchema is the schema of equality deletes by order id.
var orderIDSchema = iceberg.NewSchema(0, OrdersSchema.Field(0))

// TryUpsert commits one CDC upsert of orders ids (an equality delete of
// their ids and new rows of version) on tbl, returning errors instead of
// failing a test, for writers in goroutines and writers that retry when
// another commit moved the table (table.ErrCommitFailed).
func TryUpsert(tbl *table.Table, ids []int64, version int) (*table.Table, error) {
	ctx := context.Background()
	keys := make([][]any, len(ids))
	rows := make([][]any, len(ids))
	for i, id := range ids {
		keys[i] = []any{id}
		rows[i] = OrderRow(int(id), version)
	}
	keyRec, err := TryRecord(orderIDSchema, keys)
	if err != nil {
		return nil, err
	}
	defer keyRec.Release()
	rowRec, err := TryRecord(tbl.Schema(), rows)
	if err != nil {
		return nil, err
	}
	defer rowRec.Release()
	tx := tbl.NewTransaction()
	deletes, err := tx.WriteEqualityDeletes(ctx, []int{1}, func(yield func(arrow.RecordBatch, error) bool) { yield(keyRec, nil) })
	if err != nil {
		return nil, fmt.Errorf("write equality deletes: %w", err)
	}
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, rowRec.Schema(), func(yield func(arrow.RecordBatch, error) bool) { yield(rowRec, nil) }) {
		if err != nil {
			return nil, fmt.Errorf("write rows: %w", err)
		}
		files = append(files, df)
	}
	if err := tx.NewRowDelta(nil).AddRows(files...).AddDeletes(deletes...).Commit(ctx); err != nil {
		return nil, fmt.Errorf("stage upsert: %w", err)
	}
	return tx.Commit(ctx)
}

// UpsertRetrying commits the upsert of TryUpsert on tbl and, when another
// writer moved the table's head first (the catalog says so with
// table.ErrCommitFailed, iceberg-go with a failed requirement), again on
// the table as cat loads it, as a CDC writer beside the daemon does.
func UpsertRetrying(cat catalog.Catalog, tbl *table.Table, ids []int64, version int) (*table.Table, error) {
	for {
		next, err := TryUpsert(tbl, ids, version)
		if err == nil {
			return next, nil
		}
		fresh, lerr := cat.LoadTable(context.Background(), tbl.Identifier())
		if lerr != nil {
			return nil, fmt.Errorf("%w (and loading the table again: %v)", err, lerr)
		}
		moved := fresh.CurrentSnapshot() != nil &&
			(tbl.CurrentSnapshot() == nil || fresh.CurrentSnapshot().SnapshotID != tbl.CurrentSnapshot().SnapshotID)
		if !moved && !errors.Is(err, table.ErrCommitFailed) {
			return nil, err
		}
		tbl = fresh
	}
}

// TryRecord builds a batch of schema from rows of canonical Go values, as
// Record does, returning errors instead of failing a test.
func TryRecord(schema *iceberg.Schema, rows [][]any) (arrow.RecordBatch, error) {
	sc, err := table.SchemaToArrowSchema(schema, nil, true, false)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			if err := format.AppendValue(b.Field(i), v); err != nil {
				return nil, err
			}
		}
	}
	return b.NewRecordBatch(), nil
}
