package ingest

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// EventMutation is one index entry mutation of a change event: an entry in
// the staging encoding (format.EntryCodec) and +1 to add it or -1 to
// remove it. Seq orders the mutations of one event: an update removes the
// old entry (0) and adds the new one (1).
type EventMutation struct {
	Seq        uint8
	Key, Value []byte
	Count      int
}

// EventEntries turns decoded change events into the entry mutations of one
// index, evaluating its fields (identity columns and expressions over them)
// row by row, the way format.Entries does over Arrow batches. It keeps
// buffers, so it belongs to one goroutine; NewEventEntries is cheap.
type EventEntries struct {
	codec  *format.EntryCodec
	fields []*eventField
	entry  format.Key
	buf    []byte
}

// eventField computes one index field from a row: a row slot (slot >= 0)
// or a transform of another eventField.
type eventField struct {
	slot  int
	fn    string
	param int
	arg   *eventField
	typ   iceberg.Type // of the values it produces
}

// compileField turns an index field's expression into an eventField.
func compileField(e format.Expr, rc *RowColumns, depth int) (*eventField, error) {
	if depth > 16 {
		return nil, fmt.Errorf("expression nested deeper than 16")
	}
	switch e := e.(type) {
	case format.Ref:
		if name, _, meta := format.MetadataColumn(e.ID); meta {
			return nil, fmt.Errorf("%s is not carried by change events", name)
		}
		slot, ok := rc.Slot(e.ID)
		if !ok {
			return nil, fmt.Errorf("field %d is not decoded", e.ID)
		}
		return &eventField{slot: slot, typ: rc.slots[slot].typ}, nil
	case format.Apply:
		typ, err := format.ResultType(e, func(id int) (iceberg.Type, bool) {
			if slot, ok := rc.Slot(id); ok {
				return rc.slots[slot].typ, true
			}
			_, t, ok := format.MetadataColumn(id)
			return t, ok
		})
		if err != nil {
			return nil, err
		}
		f := &eventField{slot: -1, fn: e.Function.Name, typ: typ}
		for _, a := range e.Args {
			if l, ok := a.(format.Lit); ok {
				if f.param, err = l.Int(); err != nil {
					return nil, fmt.Errorf("%s: %w", f.fn, err)
				}
				continue
			}
			if f.arg, err = compileField(a, rc, depth+1); err != nil {
				return nil, err
			}
		}
		if f.arg == nil {
			return nil, fmt.Errorf("%s without a column", f.fn)
		}
		return f, nil
	}
	return nil, fmt.Errorf("expression %s cannot be computed from a row", e)
}

// value computes the field over one row.
func (f *eventField) value(row *Row) (any, error) {
	if f.slot >= 0 {
		return row.Values[f.slot], nil
	}
	v, err := f.arg.value(row)
	if err != nil {
		return nil, err
	}
	return format.TransformValue(f.fn, f.param, f.arg.typ, v)
}

// NewEventEntries returns the entry maker of index schema is over rows of
// rc. Every source field the index reads must be one of rc's columns; an
// index field over a metadata column (_file, _pos, ...) cannot be computed
// from events and is an error.
func NewEventEntries(is *format.IndexSchema, rc *RowColumns) (*EventEntries, error) {
	m := &EventEntries{codec: format.NewEntryCodec(is)}
	for _, f := range is.Fields() {
		e := f.Expr
		if e == nil {
			e = format.Ref{ID: f.ID}
		}
		ef, err := compileField(e, rc, 0)
		if err != nil {
			return nil, fmt.Errorf("index field %s: %w", f.Name, err)
		}
		m.fields = append(m.fields, ef)
	}
	return m, nil
}

// Mutations appends to dst the mutations ev makes to the index. Their Key
// and Value slices share one buffer that the next call reuses.
func (m *EventEntries) Mutations(dst []EventMutation, ev *ChangeEvent) ([]EventMutation, error) {
	m.buf = m.buf[:0]
	type part struct {
		row   *Row
		seq   uint8
		count int
	}
	var parts [2]part
	n := 0
	switch ev.Op {
	case OpInsert:
		parts[0], n = part{&ev.After, 1, 1}, 1
	case OpDelete:
		parts[0], n = part{&ev.Before, 0, -1}, 1
	case OpUpdate:
		parts[0], parts[1], n = part{&ev.Before, 0, -1}, part{&ev.After, 1, 1}, 2
	default:
		return dst, fmt.Errorf("change event without an operation")
	}
	var spans [2][3]int
	for i, p := range parts[:n] {
		if err := m.evaluate(p.row); err != nil {
			return dst, err
		}
		start := len(m.buf)
		var err error
		if m.buf, err = m.codec.AppendKey(m.buf, m.entry); err != nil {
			return dst, err
		}
		mid := len(m.buf)
		if m.buf, err = m.codec.AppendValue(m.buf, m.entry); err != nil {
			return dst, err
		}
		spans[i] = [3]int{start, mid, len(m.buf)}
	}
	// The buffer may have moved while it grew: slice it at the end.
	for i, p := range parts[:n] {
		s := spans[i]
		dst = append(dst, EventMutation{Seq: p.seq, Key: m.buf[s[0]:s[1]:s[1]], Value: m.buf[s[1]:s[2]:s[2]], Count: p.count})
	}
	return dst, nil
}

// evaluate computes the entry of a row into m.entry.
func (m *EventEntries) evaluate(row *Row) error {
	m.entry = m.entry[:0]
	for _, f := range m.fields {
		v, err := f.value(row)
		if err != nil {
			return err
		}
		m.entry = append(m.entry, v)
	}
	return nil
}
