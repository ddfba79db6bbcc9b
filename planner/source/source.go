// Package source is what the planner asks of the table a lookup is for,
// kept apart from how it is read. A lookup through an index snapshot built
// for the requested table snapshot reads only the table's metadata file
// (a tablemeta.View); a lookup through one built for an ancestor needs
// the deletes and data files committed since, which only a Table that
// reads manifests and data files has (planner/reconcile makes one of an
// iceberg-go table). The split lets a program that answers lookups of
// current indexes (the light `streamidx lookup`) run without linking
// iceberg-go's table package, whose initialisation alone takes tens of
// milliseconds.
//
// Concurrency: Metadata's Table is safe for concurrent use; so must be
// every implementation, and the Reconcilers they return.
package source

import (
	"context"
	"errors"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablemeta"
)

// ErrMetadataOnly is returned (wrapped) by the Reconcile of a Table that
// reads only the table's metadata file: the lookup needs the table's
// manifests or data files (an index that lags the table snapshot, or an
// index type the planner does not implement).
var ErrMetadataOnly = errors.New("the lookup needs the table's manifests and data files, and this process reads only its metadata")

// Table is the table a lookup answers for.
type Table interface {
	// View is the table at the metadata file the lookup reads.
	View() *tablemeta.View
	// Reconcile returns what makes the answer of an index snapshot built
	// for table snapshot req.From exact for the later snapshot req.To.
	Reconcile(ctx context.Context, req Request) (Reconciler, error)
}

// Request asks for a Reconciler.
type Request struct {
	// Index is the index looked up.
	Index *format.Metadata
	// From is the table snapshot the index snapshot was built for; 0 for
	// none, where every data file of To counts as added (a table scan).
	From, To int64
	// Schema is To's schema.
	Schema      *iceberg.Schema
	IndexSchema *format.IndexSchema
	Columns     *Columns
	// Store, when it keeps a lookup cache, shares a Reconciler between
	// the lookups of one index and pair of table snapshots.
	Store     *objstore.Store
	Allocator memory.Allocator
}

// Columns are the stored fields of an index schema as the batches of a
// lookup hold them.
type Columns struct {
	Fields []format.IndexField
	Schema *arrow.Schema
	// ColOf maps a stored field ID to its column.
	ColOf map[int]int
	// FileCol and PosCol are the columns of _file and _pos, -1 without.
	FileCol, PosCol int
	// Exact maps a source field ID to the stored identity field that holds
	// its value.
	Exact map[int]int
	// Layout names the stored fields and their types: what is derived for
	// one index schema serves another only if they agree.
	Layout string
}

// StoredOf picks the stored fields out of a batch of index entries (whose
// Arrow fields carry their field IDs); the caller releases the result.
func (c *Columns) StoredOf(entries arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(c.Fields))
	byID := map[int]int{}
	for i, f := range entries.Schema().Fields() {
		v, _ := f.Metadata.GetValue(format.ParquetFieldIDKey)
		if id, err := strconv.Atoi(v); err == nil {
			byID[id] = i
		}
	}
	for i, f := range c.Fields {
		cols[i] = entries.Column(byID[f.ID])
	}
	return array.NewRecordBatch(c.Schema, cols, entries.NumRows())
}

// Reconciler corrects the answer of an index snapshot built for table
// snapshot S for a later snapshot T that descends from S.
type Reconciler interface {
	// Removed counts the data files live at S and not at T.
	Removed() int
	// Added lists the data files live at T and not at S, in manifest order.
	Added() []string
	// Drop clears keep[i] for the kept rows of a batch of stored index
	// fields whose row is no longer live at T, and returns how many.
	Drop(ctx context.Context, c *Columns, b arrow.RecordBatch, keep []bool) (int64, error)
	// ScanAdded calls fn with the stored fields of the index entries of
	// the live rows of the added data files, allocated with mem; onFile
	// before it reads a file and onRows with the rows read. An error of fn
	// stops the scan and is returned.
	ScanAdded(ctx context.Context, c *Columns, mem memory.Allocator, onFile func(), onRows func(int64), fn func(stored arrow.RecordBatch) error) error
}

// Metadata is a Table that reads only the table's metadata file.
func Metadata(v *tablemeta.View) Table { return metadataOnly{v} }

type metadataOnly struct{ v *tablemeta.View }

func (m metadataOnly) View() *tablemeta.View { return m.v }

func (m metadataOnly) Reconcile(context.Context, Request) (Reconciler, error) {
	return nil, ErrMetadataOnly
}
