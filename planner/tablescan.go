package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// scanTable answers a lookup through an index whose type the planner does
// not implement. The spec says a reader must then ignore the index and
// read the source table, and must not fail: the answer comes from a scan
// of every data file of the table snapshot, shaped like the answer of an
// index that stores every primitive column with _file and _pos, and the
// plan says it was a table scan and why.
func (p *Planner) scanTable(ctx context.Context, tbl Table, md *format.Metadata, q Query) (*Result, error) {
	v := tbl.View()
	if err := format.CheckTable(md, v); err != nil {
		return nil, err
	}
	pred, err := q.predicate()
	if err != nil {
		return nil, err
	}
	target, err := v.Snapshot(q.TableSnapshotID)
	if err != nil {
		return nil, err
	}
	schema := v.SnapshotSchema(target)
	is, err := format.NewIndexSchema(scanDefinition(schema), schema)
	if err != nil {
		return nil, fmt.Errorf("table scan of %s: %w", v.Name(), err)
	}
	r, err := resolve(pred, is, schema)
	if err != nil {
		return nil, err
	}
	cols, err := storedColumns(is)
	if err != nil {
		return nil, err
	}
	run := p.newRun(cols, r, q.Limit)
	run.res.Plan = Plan{
		IndexUUID: md.IndexUUID, TableSnapshotID: target.ID, Predicate: pred.String(),
		TableScan: fmt.Sprintf("index type %q is not implemented by streamidx: the index is ignored and the table read directly, "+
			"as the spec requires of a reader that does not implement an index type", md.Type),
	}
	if err := run.reconcile(ctx, tbl, md, 0, target.ID, schema); err != nil {
		run.res.Release()
		return nil, fmt.Errorf("table scan of %s: %w", v.Name(), err)
	}
	if !r.none {
		if err := run.scanAdded(ctx); err != nil && !errors.Is(err, errLimit) {
			run.res.Release()
			return nil, err
		}
	}
	return run.res, nil
}

// scanDefinition is the index a table scan answers as: every primitive
// column outside lists and maps, in schema order, then _file and _pos,
// under field IDs the schema does not use.
func scanDefinition(schema *iceberg.Schema) *format.Metadata {
	md := &format.Metadata{FormatVersion: format.FormatVersion, Type: format.TypeScalar}
	var walk func(fields []iceberg.NestedField)
	walk = func(fields []iceberg.NestedField) {
		for _, f := range fields {
			switch t := f.Type.(type) {
			case *iceberg.StructType:
				walk(t.FieldList)
			default:
				if format.IsPrimitive(f.Type) {
					md.IdentityFields = append(md.IdentityFields, f.ID)
				}
			}
		}
	}
	walk(schema.Fields())
	id := format.MaxIndexFieldID
	for _, ref := range []int{format.FieldIDFile, format.FieldIDPos} {
		for _, taken := schema.FindFieldByID(id); taken || slices.Contains(md.IdentityFields, id); _, taken = schema.FindFieldByID(id) {
			id--
		}
		_, t, _ := format.MetadataColumn(ref)
		md.MaterializedFields = append(md.MaterializedFields, format.ExprField{FieldID: id, Type: format.ExprFieldType, DataType: t, Expr: format.Ref{ID: ref}})
		id--
	}
	if len(md.IdentityFields) > 0 {
		md.ClusterSpec = []int{md.IdentityFields[0]}
	} else {
		md.ClusterSpec = []int{md.MaterializedFields[1].FieldID}
	}
	return md
}
