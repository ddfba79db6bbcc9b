package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A minimal reader and writer of the Thrift compact protocol, enough to
// rewrite a Parquet footer without the generated types of a Parquet
// library: a struct is read into a tree of fields that keeps every field,
// known or not, and written back as it was, except for the fields changed.
// Copying row groups from one range file into another (rangefile_copy.go)
// moves their column chunks, so the offsets the footer and the offset
// indexes hold must move too; nothing else is interpreted.

// Compact protocol type codes.
const (
	tcStop   = 0
	tcTrue   = 1
	tcFalse  = 2
	tcByte   = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
)

// tField is one field of a struct: bool, int64 (every integer width),
// float64, []byte, tStruct, *tList or *tMap, by typ.
type tField struct {
	id  int16
	typ byte // tcTrue for a bool field whatever its value
	v   any
}

// tStruct is a struct's fields in the order read (or set).
type tStruct []tField

type tList struct {
	elem  byte // tcTrue for bools
	items []any
}

type tMap struct {
	key, val   byte
	keys, vals []any
}

// field returns the field with the given ID, or nil.
func (s tStruct) field(id int16) *tField {
	for i := range s {
		if s[i].id == id {
			return &s[i]
		}
	}
	return nil
}

// i64 returns an integer field and whether it is there.
func (s tStruct) i64(id int16) (int64, bool) {
	f := s.field(id)
	if f == nil {
		return 0, false
	}
	v, ok := f.v.(int64)
	return v, ok
}

// setInt sets an integer field of type typ, adding it when missing.
func (s *tStruct) setInt(id int16, typ byte, v int64) {
	if f := s.field(id); f != nil {
		f.typ, f.v = typ, v
		return
	}
	*s = append(*s, tField{id: id, typ: typ, v: v})
}

// shift adds d to an integer field when it is there.
func (s tStruct) shift(id int16, d int64) {
	if f := s.field(id); f != nil {
		if v, ok := f.v.(int64); ok {
			f.v = v + d
		}
	}
}

// clone copies a struct deeply, so that a footer read once can be changed
// for each file it is copied into.
func (s tStruct) clone() tStruct {
	out := make(tStruct, len(s))
	for i, f := range s {
		out[i] = tField{id: f.id, typ: f.typ, v: cloneValue(f.v)}
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case tStruct:
		return v.clone()
	case *tList:
		items := make([]any, len(v.items))
		for i, it := range v.items {
			items[i] = cloneValue(it)
		}
		return &tList{elem: v.elem, items: items}
	case *tMap:
		m := &tMap{key: v.key, val: v.val, keys: make([]any, len(v.keys)), vals: make([]any, len(v.vals))}
		for i := range v.keys {
			m.keys[i], m.vals[i] = cloneValue(v.keys[i]), cloneValue(v.vals[i])
		}
		return m
	}
	return v // immutable: numbers, bools, and byte slices never written to
}

// errThrift is wrapped by every decoding failure.
var errThrift = errors.New("malformed thrift compact data")

// maxThriftDepth bounds nesting, so that a hostile footer cannot exhaust
// the stack.
const maxThriftDepth = 64

type thriftReader struct {
	buf []byte
	pos int
}

// readStruct decodes one struct of b and returns it with the bytes it took.
func readStruct(b []byte) (tStruct, int, error) {
	r := &thriftReader{buf: b}
	s, err := r.readStruct(0)
	if err != nil {
		return nil, 0, fmt.Errorf("%w at byte %d: %w", errThrift, r.pos, err)
	}
	return s, r.pos, nil
}

func (r *thriftReader) byte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, errors.New("unexpected end")
	}
	c := r.buf[r.pos]
	r.pos++
	return c, nil
}

func (r *thriftReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	r.pos += n
	return v, nil
}

func (r *thriftReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (r *thriftReader) readStruct(depth int) (tStruct, error) {
	if depth > maxThriftDepth {
		return nil, errors.New("nested too deep")
	}
	var s tStruct
	var last int16
	for {
		h, err := r.byte()
		if err != nil {
			return nil, err
		}
		if h == tcStop {
			return s, nil
		}
		typ := h & 0x0f
		id := last + int16(h>>4)
		if h>>4 == 0 {
			v, err := r.varint()
			if err != nil {
				return nil, err
			}
			if v < math.MinInt16 || v > math.MaxInt16 {
				return nil, fmt.Errorf("field id %d", v)
			}
			id = int16(v)
		}
		last = id
		var v any
		switch typ {
		case tcTrue, tcFalse:
			v, typ = typ == tcTrue, tcTrue
		default:
			if v, err = r.value(typ, depth); err != nil {
				return nil, err
			}
		}
		s = append(s, tField{id: id, typ: typ, v: v})
	}
}

func (r *thriftReader) value(typ byte, depth int) (any, error) {
	switch typ {
	case tcTrue, tcFalse: // a bool in a collection is a byte
		c, err := r.byte()
		return c == tcTrue, err
	case tcByte:
		c, err := r.byte()
		return int64(int8(c)), err
	case tcI16, tcI32, tcI64:
		return r.varint()
	case tcDouble:
		if len(r.buf)-r.pos < 8 {
			return nil, errors.New("unexpected end")
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.buf[r.pos:]))
		r.pos += 8
		return v, nil
	case tcBinary:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(r.buf)-r.pos) {
			return nil, fmt.Errorf("binary of %d bytes past the end", n)
		}
		v := r.buf[r.pos : r.pos+int(n) : r.pos+int(n)]
		r.pos += int(n)
		return v, nil
	case tcList, tcSet:
		h, err := r.byte()
		if err != nil {
			return nil, err
		}
		n, elem := uint64(h>>4), h&0x0f
		if n == 15 {
			if n, err = r.uvarint(); err != nil {
				return nil, err
			}
		}
		if n > uint64(len(r.buf)-r.pos) { // every element takes a byte at least
			return nil, fmt.Errorf("list of %d elements past the end", n)
		}
		if elem == tcFalse {
			elem = tcTrue
		}
		l := &tList{elem: elem, items: make([]any, 0, n)}
		for range n {
			v, err := r.elem(elem, depth)
			if err != nil {
				return nil, err
			}
			l.items = append(l.items, v)
		}
		return l, nil
	case tcMap:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		m := &tMap{}
		if n == 0 {
			return m, nil
		}
		if n > uint64(len(r.buf)-r.pos) {
			return nil, fmt.Errorf("map of %d entries past the end", n)
		}
		h, err := r.byte()
		if err != nil {
			return nil, err
		}
		m.key, m.val = h>>4, h&0x0f
		for range n {
			k, err := r.elem(m.key, depth)
			if err != nil {
				return nil, err
			}
			v, err := r.elem(m.val, depth)
			if err != nil {
				return nil, err
			}
			m.keys, m.vals = append(m.keys, k), append(m.vals, v)
		}
		return m, nil
	case tcStruct:
		return r.readStruct(depth + 1)
	}
	return nil, fmt.Errorf("unknown type %d", typ)
}

func (r *thriftReader) elem(typ byte, depth int) (any, error) {
	if typ == tcStruct || typ == tcList || typ == tcSet || typ == tcMap {
		return r.value(typ, depth+1)
	}
	return r.value(typ, depth)
}

// appendStruct encodes s after b.
func appendStruct(b []byte, s tStruct) []byte {
	var last int16
	for _, f := range s {
		typ := f.typ
		if typ == tcTrue && f.v == false {
			typ = tcFalse
		}
		if d := f.id - last; d > 0 && d <= 15 {
			b = append(b, byte(d)<<4|typ)
		} else {
			b = append(b, typ)
			b = binary.AppendUvarint(b, zigzag(int64(f.id)))
		}
		last = f.id
		if f.typ != tcTrue {
			b = appendValue(b, f.typ, f.v)
		}
	}
	return append(b, tcStop)
}

func appendValue(b []byte, typ byte, v any) []byte {
	switch typ {
	case tcTrue, tcFalse:
		if v == true {
			return append(b, tcTrue)
		}
		return append(b, tcFalse)
	case tcByte:
		return append(b, byte(v.(int64)))
	case tcI16, tcI32, tcI64:
		return binary.AppendUvarint(b, zigzag(v.(int64)))
	case tcDouble:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.(float64)))
	case tcBinary:
		p := v.([]byte)
		return append(binary.AppendUvarint(b, uint64(len(p))), p...)
	case tcList, tcSet:
		l := v.(*tList)
		if n := len(l.items); n < 15 {
			b = append(b, byte(n)<<4|l.elem)
		} else {
			b = binary.AppendUvarint(append(b, 0xf0|l.elem), uint64(n))
		}
		for _, it := range l.items {
			b = appendValue(b, l.elem, it)
		}
		return b
	case tcMap:
		m := v.(*tMap)
		b = binary.AppendUvarint(b, uint64(len(m.keys)))
		if len(m.keys) == 0 {
			return b
		}
		b = append(b, m.key<<4|m.val)
		for i := range m.keys {
			b = appendValue(appendValue(b, m.key, m.keys[i]), m.val, m.vals[i])
		}
		return b
	case tcStruct:
		return appendStruct(b, v.(tStruct))
	}
	panic(fmt.Sprintf("thrift compact: no type %d", typ))
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }
