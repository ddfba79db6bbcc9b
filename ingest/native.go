package ingest

import (
	"errors"
	"fmt"
)

// native decodes streamidx's native change event:
//
//	{"op": "upsert", "table": "sales.orders", "row": {...}, "before": {...}}
//	{"op": "delete", "table": "sales.orders", "row": {...}}
//
// An upsert inserts row; when the row existed, before is its previous image,
// whose entry is removed (an index entry is found by its values, so an
// upsert that replaces a row without naming the old one would leave the old
// entry behind). A delete removes row. table is optional when the topic is
// bound to one table. Values are in the Iceberg type's own terms: numbers
// (dates as days, times and timestamps in micros, or nanos for the _ns
// types) or ISO 8601 strings; decimals as numbers or decimal strings;
// binary, fixed as base64; "NaN", "Infinity" and "-Infinity" for floats.
// Unknown members are an error.
func (d *ChangeDecoder) native(top *members, ev *ChangeEvent) error {
	*ev = ChangeEvent{Before: ev.Before, After: ev.After, scratch: ev.scratch[:0]} // what was decoded in passing is Debezium's
	d.encs = d.plain
	if top.unknown != "" {
		return fmt.Errorf("native change event: unknown member %q (want op, table, row, before)", top.unknown)
	}
	if top.schema != nil || top.payload != nil || top.after != nil {
		return errors.New("native change event: schema, payload and after belong to Debezium envelopes")
	}
	if top.table != nil {
		t, err := stringMember(top.table, "native change event: table")
		if err != nil {
			return err
		}
		ev.Table = t
	}
	if top.op == nil {
		return errors.New("native change event: no op")
	}
	switch string(top.op) {
	case `"upsert"`:
		ev.Op = OpInsert
		if top.before != nil && !isNull(top.before) {
			ev.Op = OpUpdate
			if err := d.decodeImage(top.before, &ev.Before, ev); err != nil {
				return fmt.Errorf("before: %w", err)
			}
		}
		if isNull(top.row) {
			return errors.New("native upsert: row is null")
		}
		if err := d.decodeImage(top.row, &ev.After, ev); err != nil {
			return fmt.Errorf("row: %w", err)
		}
	case `"delete"`:
		ev.Op = OpDelete
		if top.before != nil {
			return errors.New("native delete: before is for upserts; the row to delete is row")
		}
		if isNull(top.row) {
			return errors.New("native delete: row is null")
		}
		if err := d.decodeImage(top.row, &ev.Before, ev); err != nil {
			return fmt.Errorf("row: %w", err)
		}
	default:
		op, err := stringMember(top.op, "native change event: op")
		if err != nil {
			return err
		}
		return fmt.Errorf("native change event: op %q: want upsert or delete", op)
	}
	return nil
}

// PeekTable returns the table a native change event names, or "" when the
// value is no native event or names none; it decodes nothing else, so a
// feed can route a record before decoding it with the table's columns.
func PeekTable(value []byte) string {
	top, err := readTop(value, nil)
	if err != nil || top.row == nil || top.table == nil {
		return ""
	}
	t, err := stringMember(top.table, "table")
	if err != nil {
		return ""
	}
	return t
}
