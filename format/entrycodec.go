package format

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
)

// EntryCodec is the encoding of index entries as byte records, which the
// staging store keeps, the full build sorts and the merge reads (README.md,
// "Entry records"). A record's key is the order-preserving encoding
// (AppendKey in key.go) of the clustering key, then the identity values,
// then the row location when the index stores one, so the byte order of
// keys is the spec's cluster order and entries of one clustering key sort by
// identity. Its value is the encoding of every entry field in EntrySchema
// order, so that an entry is its whole value even when the key does not
// identify it.
type EntryCodec struct {
	types    []iceberg.Type // every entry field, EntrySchema order
	keyPos   []int          // positions of the key's fields: cluster, identity, location
	keyTypes []iceberg.Type
	nCluster int
}

// NewEntryCodec returns the codec of an index's entries.
func NewEntryCodec(s *IndexSchema) *EntryCodec {
	c := &EntryCodec{}
	pos := map[int]int{}
	for i, f := range s.Fields() {
		pos[f.ID] = i
		c.types = append(c.types, f.Type)
	}
	add := func(id int) {
		c.keyPos = append(c.keyPos, pos[id])
		c.keyTypes = append(c.keyTypes, c.types[pos[id]])
	}
	for _, f := range s.ClusterFields() {
		add(f.ID)
	}
	c.nCluster = len(c.keyPos)
	for _, f := range s.Fields() {
		if f.Kind == KindIdentity {
			add(f.ID)
		}
	}
	for _, f := range s.Fields() {
		if r, ok := f.Expr.(Ref); ok && f.Kind == KindMaterialized && IsLocationField(r.ID) {
			add(f.ID)
		}
	}
	return c
}

// Row reads row i of an entry batch (ArrowSchema(EntrySchema)) as values.
func (c *EntryCodec) Row(dst Key, rec arrow.RecordBatch, i int) Key {
	dst = dst[:0]
	for col, t := range c.types {
		dst = append(dst, ValueAtAs(t, rec.Column(col), i))
	}
	return dst
}

// AppendKey appends the staging key of an entry.
func (c *EntryCodec) AppendKey(dst []byte, entry Key) ([]byte, error) {
	var err error
	for i, p := range c.keyPos {
		if dst, err = AppendValueKey(dst, c.keyTypes[i], entry[p]); err != nil {
			return nil, fmt.Errorf("encode entry key: %w", err)
		}
	}
	return dst, nil
}

// AppendValue appends the encoding of all of an entry's values.
func (c *EntryCodec) AppendValue(dst []byte, entry Key) ([]byte, error) {
	out, err := AppendKey(dst, c.types, entry)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	return out, nil
}

// DecodeValue reads an entry encoded by AppendValue.
func (c *EntryCodec) DecodeValue(data []byte) (Key, error) {
	k, rest, err := DecodeKey(data, c.types)
	if err != nil {
		return nil, fmt.Errorf("decode staged entry: %w", err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode staged entry: %d trailing bytes", len(rest))
	}
	return k, nil
}

// ClusterKey returns the clustering key of an entry (a view, not a copy).
func (c *EntryCodec) ClusterKey(dst Key, entry Key) Key {
	dst = dst[:0]
	for _, p := range c.keyPos[:c.nCluster] {
		dst = append(dst, entry[p])
	}
	return dst
}

// Types are the entry fields' types in EntrySchema order.
func (c *EntryCodec) Types() []iceberg.Type { return c.types }
