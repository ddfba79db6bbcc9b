package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/jsonscan"
)

// Conditions of a change event that callers act on.
var (
	// ErrTombstone: the record has no value (a Kafka tombstone, which
	// Debezium writes after a delete so that log compaction can drop the
	// key). It carries no change: skip it and count it.
	ErrTombstone = errors.New("tombstone")
	// ErrUnknownColumn: a row image holds a column the table's schema does
	// not have. The schema may have changed since the decoder was built, so
	// a caller may reload it and try again once.
	ErrUnknownColumn = errors.New("column not in the table schema")
)

// EventOp is what a change event does to a row.
type EventOp uint8

// Change event operations.
const (
	// OpInsert adds the After row (Debezium c and r, a native upsert
	// without before).
	OpInsert EventOp = iota + 1
	// OpUpdate replaces the Before row with the After row (Debezium u, a
	// native upsert with before).
	OpUpdate
	// OpDelete removes the Before row (Debezium d, a native delete).
	OpDelete
)

func (o EventOp) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("EventOp(%d)", uint8(o))
}

// ChangeEvent is one decoded change event: only the columns of the
// RowColumns it was decoded with are read.
type ChangeEvent struct {
	Op EventOp
	// Table is the table the native form names ("" for Debezium events,
	// whose table the topic decides).
	Table string
	// Before is the row before the change (OpUpdate, OpDelete); After the
	// row after it (OpInsert, OpUpdate).
	Before, After Row

	scratch []byte // unescaped strings of the record being decoded
}

// Row holds the values of the columns a RowColumns asks for, by slot, as
// the canonical Go values of format (nil is null).
type Row struct {
	Values []any
	set    []bool
}

func (r *Row) reset(n int) {
	if cap(r.Values) < n {
		r.Values, r.set = make([]any, n), make([]bool, n)
	}
	r.Values, r.set = r.Values[:n], r.set[:n]
	clear(r.Values)
	clear(r.set)
}

// RowColumns maps the columns of change-event rows to source field IDs by
// name through a table schema, and says which of them to decode: the
// fields an index needs. A nested field is a JSON object member inside its
// struct column's object (or, equally, a member named with the dotted path
// at the top level). Columns the schema does not have are an error for the
// record; columns nobody needs are skipped unread. It is immutable and safe
// to share.
type RowColumns struct {
	root  *colNode
	slots []colSlot
	byID  map[int]int
}

// colSlot is one column to decode.
type colSlot struct {
	id       int
	name     string // dotted path
	typ      iceberg.Type
	required bool
}

// colNode is a column of the schema, or the root.
type colNode struct {
	name     string
	children map[string]*colNode // struct members; nil for other types
	slot     int                 // index in slots; -1 when not decoded
	needed   bool                // this column or one inside it is decoded
}

// NewRowColumns returns the columns of schema, decoding those of fieldIDs
// (primitive fields, at the top level or inside structs). A field the
// schema does not have, a metadata column or a field inside a list or map
// is an error: change events carry row values only.
func NewRowColumns(schema *iceberg.Schema, fieldIDs []int) (*RowColumns, error) {
	rc := &RowColumns{root: &colNode{slot: -1, children: map[string]*colNode{}}, byID: map[int]int{}}
	addStruct(rc.root, schema.Fields(), "")
	for _, id := range fieldIDs {
		if _, dup := rc.byID[id]; dup {
			continue
		}
		if name, _, meta := format.MetadataColumn(id); meta {
			return nil, fmt.Errorf("field %s: change events carry no row location or metadata column", name)
		}
		f, ok := schema.FindFieldByID(id)
		if !ok {
			return nil, fmt.Errorf("field %d is not in the table schema", id)
		}
		name, _ := schema.FindColumnName(id)
		path, ok := structPath(schema.Fields(), id)
		if !ok {
			return nil, fmt.Errorf("column %s is inside a list or map: change events are read by struct path only", name)
		}
		if !format.IsPrimitive(f.Type) {
			return nil, fmt.Errorf("column %s has type %s: only primitive columns are decoded", name, f.Type)
		}
		node := rc.root
		for _, part := range path {
			node = node.children[part]
			node.needed = true
		}
		node.slot = len(rc.slots)
		rc.byID[id] = node.slot
		rc.slots = append(rc.slots, colSlot{id: id, name: name, typ: f.Type, required: f.Required})
	}
	return rc, nil
}

func addStruct(parent *colNode, fields []iceberg.NestedField, prefix string) {
	for _, f := range fields {
		n := &colNode{name: prefix + f.Name, slot: -1}
		if st, ok := f.Type.(*iceberg.StructType); ok {
			n.children = map[string]*colNode{}
			addStruct(n, st.FieldList, n.name+".")
		}
		parent.children[f.Name] = n
	}
}

// structPath returns the names from the top level down to field id through
// structs only.
func structPath(fields []iceberg.NestedField, id int) ([]string, bool) {
	for _, f := range fields {
		if f.ID == id {
			return []string{f.Name}, true
		}
		if st, ok := f.Type.(*iceberg.StructType); ok {
			if p, ok := structPath(st.FieldList, id); ok {
				return append([]string{f.Name}, p...), true
			}
		}
	}
	return nil, false
}

// Slot returns the slot of field id in rows, and whether it is decoded.
func (rc *RowColumns) Slot(id int) (int, bool) {
	s, ok := rc.byID[id]
	return s, ok
}

// Len is the number of decoded columns: the length of Row.Values.
func (rc *RowColumns) Len() int { return len(rc.slots) }

// FieldIDs are the decoded fields, by slot.
func (rc *RowColumns) FieldIDs() []int {
	out := make([]int, len(rc.slots))
	for i, s := range rc.slots {
		out[i] = s.id
	}
	return out
}

// decodeRow reads a row image object into row: every decoded column must be
// present (null is a value); columns not in the schema are an error. conv
// turns each JSON value into its column's canonical value.
func (rc *RowColumns) decodeRow(s *jsonscan.Scanner, row *Row, scratch *[]byte, conv func(slot int, s *jsonscan.Scanner, scratch *[]byte) (any, error)) error {
	row.reset(len(rc.slots))
	if err := rc.decodeObject(s, rc.root, row, scratch, conv, 0); err != nil {
		return err
	}
	for i, ok := range row.set {
		if !ok {
			return fmt.Errorf("row image lacks column %s", rc.slots[i].name)
		}
	}
	return nil
}

func (rc *RowColumns) decodeObject(s *jsonscan.Scanner, node *colNode, row *Row, scratch *[]byte, conv func(int, *jsonscan.Scanner, *[]byte) (any, error), depth int) error {
	if depth > jsonscan.MaxDepth {
		return s.Errorf("nested deeper than %d", jsonscan.MaxDepth)
	}
	return s.Object(func(rawKey []byte, escaped bool) error {
		key, sc, err := jsonscan.KeyString(rawKey, escaped, *scratch)
		if err != nil {
			return err
		}
		*scratch = sc
		child := node.children[string(key)]
		if child == nil && node == rc.root && bytes.IndexByte(key, '.') > 0 {
			child = rc.dotted(string(key))
		}
		if child == nil {
			return fmt.Errorf("%w: %s", ErrUnknownColumn, joinName(node.name, key))
		}
		switch {
		case !child.needed && child.slot < 0:
			_, err := s.SkipDepth(depth + 1)
			return err
		case child.slot >= 0:
			if row.set[child.slot] {
				return fmt.Errorf("column %s appears twice", child.name)
			}
			v, err := conv(child.slot, s, scratch)
			if err != nil {
				return fmt.Errorf("column %s: %w", child.name, err)
			}
			row.Values[child.slot], row.set[child.slot] = v, true
			return nil
		}
		if s.Peek() == jsonscan.Null { // a null struct: every field in it is null
			_ = s.Literal("null")
			rc.setNulls(child, row)
			return nil
		}
		if s.Peek() != jsonscan.Object {
			return fmt.Errorf("column %s: want an object for a struct", child.name)
		}
		return rc.decodeObject(s, child, row, scratch, conv, depth+1)
	})
}

// dotted finds a column by its dotted path written as one key.
func (rc *RowColumns) dotted(key string) *colNode {
	node := rc.root
	for part := range strings.SplitSeq(key, ".") {
		if node = node.children[part]; node == nil {
			return nil
		}
	}
	return node
}

func (rc *RowColumns) setNulls(n *colNode, row *Row) {
	if n.slot >= 0 {
		row.Values[n.slot], row.set[n.slot] = nil, true
	}
	for _, c := range n.children {
		rc.setNulls(c, row)
	}
}

func joinName(prefix string, key []byte) string {
	if prefix == "" {
		return string(key)
	}
	return prefix + "." + string(key)
}

// checkNulls refuses a null in a required column.
func (rc *RowColumns) checkNulls(row *Row) error {
	for i, s := range rc.slots {
		if s.required && row.Values[i] == nil {
			return fmt.Errorf("column %s is required but null", s.name)
		}
	}
	return nil
}

// sortedNames lists the decoded columns, for messages.
func (rc *RowColumns) sortedNames() []string {
	var out []string
	for _, s := range rc.slots {
		out = append(out, s.name)
	}
	slices.Sort(out)
	return out
}

// ChangeDecoder decodes change-topic records, reading only the columns of
// its RowColumns: streamidx's native form when the top-level object has a
// "row" member, a Debezium envelope otherwise. It keeps the encodings read
// from the last Debezium schema it saw, so it belongs to one goroutine;
// make one per goroutine with NewChangeDecoder.
type ChangeDecoder struct {
	rc       *RowColumns
	opts     DebeziumOptions
	plain    []colEncoding // by slot: the native form
	noSchema []colEncoding // by slot: Debezium without a schema
	// The last Debezium schema seen and the encodings it gives.
	schema     []byte
	schemaEncs []colEncoding
	encs       []colEncoding // in use for the record being decoded
}

// NewChangeDecoder returns a decoder of rc's columns.
func NewChangeDecoder(rc *RowColumns, opts DebeziumOptions) (*ChangeDecoder, error) {
	opts.EnsureDefaults()
	mode, err := opts.decimalMode()
	if err != nil {
		return nil, err
	}
	d := &ChangeDecoder{rc: rc, opts: opts}
	for range rc.slots {
		d.plain = append(d.plain, colEncoding{scale: -1})
		d.noSchema = append(d.noSchema, colEncoding{decimal: mode, scale: -1})
	}
	return d, nil
}

// Columns are the columns the decoder reads.
func (d *ChangeDecoder) Columns() *RowColumns { return d.rc }

// Decode decodes one record value into ev. A nil or empty value, and a
// Debezium envelope whose payload is null, is ErrTombstone. ev is reused
// across calls; its rows hold values until the next call.
func (d *ChangeDecoder) Decode(value []byte, ev *ChangeEvent) error {
	*ev = ChangeEvent{Before: ev.Before, After: ev.After, scratch: ev.scratch[:0]}
	d.encs = d.noSchema // the encodings of a Debezium event without a schema, decoded in passing
	top, err := readTop(value, &passing{d: d, ev: ev})
	if err != nil {
		return err
	}
	if top.row != nil {
		return d.native(&top, ev)
	}
	return d.debezium(&top, ev)
}

func (d *ChangeDecoder) convert(slot int, s *jsonscan.Scanner, scratch *[]byte) (any, error) {
	return d.encs[slot].convert(d.rc.slots[slot].typ, s, scratch)
}

// decodeImage decodes one row image (a JSON object) into row.
func (d *ChangeDecoder) decodeImage(raw []byte, row *Row, ev *ChangeEvent) error {
	s := jsonscan.Scanner{Data: raw}
	if err := d.rc.decodeRow(&s, row, &ev.scratch, d.convert); err != nil {
		return err
	}
	return d.rc.checkNulls(row)
}

// members are the spans of the top-level members a decoder looks at.
type members struct {
	schema, payload, op, before, after, row, table []byte
	// unknown is the first member not listed above, for the native form,
	// which refuses it.
	unknown string
	// beforeRead and afterRead say that the before and after images were
	// decoded in passing, into the event's rows, from exactly the spans
	// above.
	beforeRead, afterRead bool
}

// passing decodes the before and after images of a Debezium event while
// readTop passes them, with the decoder's encodings at the time, so that
// the bytes of an image are read once rather than skipped and then read
// again. An image that fails is only skipped: whoever needs it decodes its
// span again, which gives the error its full context.
type passing struct {
	d  *ChangeDecoder
	ev *ChangeEvent
}

// image decodes the row image at s into row.
func (p *passing) image(s *jsonscan.Scanner, row *Row) bool {
	if p.d.rc.decodeRow(s, row, &p.ev.scratch, p.d.convert) != nil {
		return false
	}
	return p.d.rc.checkNulls(row) == nil
}

// readTop reads the members of a top-level object, skipping their values
// except the images p decodes (p nil: none).
func readTop(value []byte, p *passing) (members, error) {
	var m members
	s := jsonscan.Scanner{Data: value}
	if s.AtEnd() {
		return m, ErrTombstone
	}
	if s.Peek() != jsonscan.Object {
		return m, errors.New("change event: want a JSON object")
	}
	err := s.Object(func(key []byte, escaped bool) error {
		var row *Row
		var read *bool
		if p != nil {
			switch string(key) {
			case "before":
				row, read = &p.ev.Before, &m.beforeRead
			case "after":
				row, read = &p.ev.After, &m.afterRead
			}
		}
		var v []byte
		if row != nil && s.Peek() == jsonscan.Object {
			start := s.Pos
			if *read = p.image(&s, row); *read {
				v = s.Data[start:s.Pos]
			} else {
				s.Pos = start
			}
		} else if read != nil {
			*read = false
		}
		if v == nil {
			var err error
			if v, err = s.Skip(); err != nil {
				return err
			}
		}
		switch string(key) {
		case "schema":
			m.schema = v
		case "payload":
			m.payload = v
		case "op":
			m.op = v
		case "before":
			m.before = v
		case "after":
			m.after = v
		case "row":
			m.row = v
		case "table":
			m.table = v
		default:
			if m.unknown == "" {
				m.unknown = string(key)
			}
		}
		return nil
	})
	if err != nil {
		return m, fmt.Errorf("change event: %w", err)
	}
	if !s.AtEnd() {
		return m, fmt.Errorf("change event: %w: data after the object", jsonscan.ErrSyntax)
	}
	return m, nil
}

// isNull reports whether a value span is JSON null.
func isNull(v []byte) bool { return string(v) == "null" }

// stringMember decodes a member span that must be a string.
func stringMember(v []byte, what string) (string, error) {
	s := jsonscan.Scanner{Data: v}
	if s.Peek() != jsonscan.String {
		return "", fmt.Errorf("%s: want a string", what)
	}
	str, _, err := s.StringValue(nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return string(str), nil
}
