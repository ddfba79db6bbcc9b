package format

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// SourceFieldIDs returns the source fields and metadata columns that the
// index's entries are computed from: the identity fields and every field
// the expressions reference, in first-use order.
func (s *IndexSchema) SourceFieldIDs() []int {
	var ids []int
	for _, f := range s.fields {
		refs := []int{f.ID}
		if f.Expr != nil {
			refs = Refs(f.Expr)
		}
		for _, id := range refs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// Entries evaluates the index fields over a batch of source rows and returns
// the entries as a record of ArrowSchema(s.EntrySchema()): identity columns
// as they are, expression fields computed. cols must provide every field of
// SourceFieldIDs.
func Entries(mem memory.Allocator, s *IndexSchema, cols Columns) (arrow.RecordBatch, error) {
	schema, err := ArrowSchema(s.EntrySchema())
	if err != nil {
		return nil, err
	}
	arrs := make([]arrow.Array, 0, len(s.fields))
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	for i, f := range s.fields {
		var arr arrow.Array
		if f.Kind == KindIdentity {
			col, err := cols.Column(f.ID)
			if err != nil {
				return nil, fmt.Errorf("identity field %d (%s): %w", f.ID, f.Name, err)
			}
			if arr, err = castTo(mem, col, schema.Field(i).Type); err != nil {
				return nil, fmt.Errorf("identity field %d (%s): %w", f.ID, f.Name, err)
			}
		} else {
			if arr, err = Evaluate(mem, f.Expr, f.Type, cols); err != nil {
				return nil, fmt.Errorf("index field %d (%s): %w", f.ID, f.Expr, err)
			}
		}
		arrs = append(arrs, arr)
	}
	return array.NewRecordBatch(schema, arrs, int64(cols.Len())), nil
}

// castTo returns col as Arrow type dt, retaining it when it already is.
// Readers of data files may hand out large or view strings, or a uuid as
// fixed_size_binary(16); entries always use the types of ArrowType.
func castTo(mem memory.Allocator, col arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(col.DataType(), dt) {
		col.Retain()
		return col, nil
	}
	if ext, ok := dt.(arrow.ExtensionType); ok && arrow.TypeEqual(col.DataType(), ext.StorageType()) {
		return array.NewExtensionArrayWithStorage(ext, col), nil
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	out, err := compute.CastArray(ctx, col, compute.SafeCastOptions(dt))
	if err != nil {
		return nil, fmt.Errorf("convert %s to %s: %w", col.DataType(), dt, err)
	}
	return out, nil
}
