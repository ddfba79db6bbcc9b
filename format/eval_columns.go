package format

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// RecordColumns gives Evaluate the columns of a record batch read from a
// data file of a table with the given schema. Columns are matched by field
// ID: the PARQUET:field_id metadata of Arrow fields, at the top level or
// inside structs, comes first; Arrow fields without that metadata are
// matched by the names along the field's path in schema (which may be nil
// when every column carries its ID); metadata columns such as _file and _pos
// are matched by their reserved IDs or their names. The columns belong to
// the batch, which must outlive their use. A field inside a struct is null
// where the struct is; when a struct on its path has nulls, the field is
// copied into Go memory to carry them.
func RecordColumns(rec arrow.RecordBatch, schema *iceberg.Schema) Columns {
	return &recordColumns{rec: rec, schema: schema}
}

type recordColumns struct {
	rec    arrow.RecordBatch
	schema *iceberg.Schema
}

func (c *recordColumns) Len() int { return int(c.rec.NumRows()) }

func (c *recordColumns) Column(id int) (arrow.Array, error) {
	fields := c.rec.Schema().Fields()
	path, ok := arrowPathByID(fields, id)
	if !ok && c.schema != nil {
		if names, inSchema := schemaPath(c.schema.Fields(), id); inSchema {
			path, ok = arrowPathByNames(fields, names)
		}
	}
	if !ok {
		if name, _, isMeta := MetadataColumn(id); isMeta {
			path, ok = arrowPathByNames(fields, []iceberg.NestedField{{ID: id, Name: name}})
		}
	}
	if !ok {
		return nil, fmt.Errorf("find column of field %d: not in the record batch", id)
	}
	col := c.rec.Column(path[0])
	var valid []byte // the rows where every enclosing struct is valid; nil: all
	for _, j := range path[1:] {
		parent, isStruct := col.(*array.Struct)
		if !isStruct {
			return nil, fmt.Errorf("find column of field %d: %s is not a struct array", id, col.DataType())
		}
		if parent.NullN() > 0 {
			valid = andValidity(valid, parent)
		}
		col = parent.Field(j)
	}
	if valid == nil {
		return col, nil
	}
	out, err := withValidity(col, valid)
	if err != nil {
		return nil, fmt.Errorf("find column of field %d: %w", id, err)
	}
	return out, nil
}

// columnFieldID reads the field ID that Parquet readers and iceberg-go put on
// Arrow fields; a negative ID means none.
func columnFieldID(f arrow.Field) (int, bool) {
	i := f.Metadata.FindKey(ParquetFieldIDKey)
	if i < 0 {
		return 0, false
	}
	id, err := strconv.Atoi(f.Metadata.Values()[i])
	if err != nil || id < 0 {
		return 0, false
	}
	return id, true
}

// arrowPathByID finds the field with the given ID among fields and, depth
// first, inside their structs, and returns the child indexes leading to it.
// Lists and maps are not searched: their elements are not one per row.
func arrowPathByID(fields []arrow.Field, id int) ([]int, bool) {
	for j, f := range fields {
		if fid, ok := columnFieldID(f); ok && fid == id {
			return []int{j}, true
		}
		if st, ok := f.Type.(*arrow.StructType); ok {
			if sub, ok := arrowPathByID(st.Fields(), id); ok {
				return append([]int{j}, sub...), true
			}
		}
	}
	return nil, false
}

// schemaPath returns the fields from the top of the schema down to the
// field with the given ID, through structs only.
func schemaPath(fields []iceberg.NestedField, id int) ([]iceberg.NestedField, bool) {
	for _, f := range fields {
		if f.ID == id {
			return []iceberg.NestedField{f}, true
		}
		if st, ok := f.Type.(*iceberg.StructType); ok {
			if sub, ok := schemaPath(st.FieldList, id); ok {
				return append([]iceberg.NestedField{f}, sub...), true
			}
		}
	}
	return nil, false
}

// arrowPathByNames follows a schema path through the Arrow fields. At each
// level an Arrow field with the path field's ID wins; otherwise a field
// without an ID and with the path field's name matches. A field whose ID
// differs is another field, even under the same name.
func arrowPathByNames(fields []arrow.Field, names []iceberg.NestedField) ([]int, bool) {
	var path []int
	for k, want := range names {
		found := -1
		for j, f := range fields {
			fid, hasID := columnFieldID(f)
			if hasID && fid == want.ID {
				found = j
				break
			}
			if !hasID && f.Name == want.Name && found < 0 {
				found = j
			}
		}
		if found < 0 {
			return nil, false
		}
		path = append(path, found)
		if k == len(names)-1 {
			break
		}
		st, ok := fields[found].Type.(*arrow.StructType)
		if !ok {
			return nil, false
		}
		fields = st.Fields()
	}
	return path, true
}

// andValidity returns the rows valid both in valid (a bitmap from bit 0,
// nil when every row is valid) and in a.
func andValidity(valid []byte, a arrow.Array) []byte {
	n := a.Len()
	out := make([]byte, bitutil.BytesForBits(int64(n)))
	if valid == nil {
		bitutil.CopyBitmap(a.NullBitmapBytes(), a.Data().Offset(), n, out, 0)
	} else {
		bitutil.BitmapAnd(valid, a.NullBitmapBytes(), 0, int64(a.Data().Offset()), out, 0, int64(n))
	}
	return out
}

// withValidity copies col into Go memory with the nulls of its enclosing
// structs added: Arrow leaves a child's slot under a null struct
// unspecified, but the field's value there is null. The copy needs no
// release, so the Columns can hand it out like the batch's own columns.
func withValidity(col arrow.Array, valid []byte) (arrow.Array, error) {
	cp, err := array.Concatenate([]arrow.Array{col}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("copy %s column: %w", col.DataType(), err)
	}
	defer cp.Release()
	if cp.NullN() > 0 {
		valid = andValidity(valid, cp)
	}
	d := cp.Data()
	buffers := append([]*memory.Buffer{memory.NewBufferBytes(valid)}, d.Buffers()[1:]...)
	var nd *array.Data
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		nd = array.NewDataWithDictionary(d.DataType(), d.Len(), buffers, array.UnknownNullCount, 0, dict)
	} else {
		nd = array.NewData(d.DataType(), d.Len(), buffers, d.Children(), array.UnknownNullCount, 0)
	}
	defer nd.Release()
	return array.MakeFromData(nd), nil
}
