package staging

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// EntryCodec turns index entries into staging records and back. A record's
// key is the order-preserving encoding of the clustering key, then the
// identity values, then the row location when the index stores one, so the
// byte order of keys is the spec's cluster order and entries of one
// clustering key sort by identity. Its value is the encoding of every entry
// field in EntrySchema order.
type EntryCodec struct {
	types    []iceberg.Type // every entry field, EntrySchema order
	keyPos   []int          // positions of the key's fields: cluster, identity, location
	keyTypes []iceberg.Type
	nCluster int
}

// NewEntryCodec returns the codec of an index's entries.
func NewEntryCodec(s *format.IndexSchema) *EntryCodec {
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
		if f.Kind == format.KindIdentity {
			add(f.ID)
		}
	}
	for _, f := range s.Fields() {
		if r, ok := f.Expr.(format.Ref); ok && f.Kind == format.KindMaterialized && format.IsLocationField(r.ID) {
			add(f.ID)
		}
	}
	return c
}

// Row reads row i of an entry batch (ArrowSchema(EntrySchema)) as values.
func (c *EntryCodec) Row(dst format.Key, rec arrow.RecordBatch, i int) format.Key {
	dst = dst[:0]
	for col, t := range c.types {
		dst = append(dst, format.ValueAtAs(t, rec.Column(col), i))
	}
	return dst
}

// AppendKey appends the staging key of an entry.
func (c *EntryCodec) AppendKey(dst []byte, entry format.Key) ([]byte, error) {
	var err error
	for i, p := range c.keyPos {
		if dst, err = format.AppendValueKey(dst, c.keyTypes[i], entry[p]); err != nil {
			return nil, fmt.Errorf("encode entry key: %w", err)
		}
	}
	return dst, nil
}

// AppendValue appends the encoding of all of an entry's values.
func (c *EntryCodec) AppendValue(dst []byte, entry format.Key) ([]byte, error) {
	out, err := format.AppendKey(dst, c.types, entry)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	return out, nil
}

// DecodeValue reads an entry encoded by AppendValue.
func (c *EntryCodec) DecodeValue(data []byte) (format.Key, error) {
	k, rest, err := format.DecodeKey(data, c.types)
	if err != nil {
		return nil, fmt.Errorf("decode staged entry: %w", err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode staged entry: %d trailing bytes", len(rest))
	}
	return k, nil
}

// ClusterKey returns the clustering key of an entry (a view, not a copy).
func (c *EntryCodec) ClusterKey(dst format.Key, entry format.Key) format.Key {
	dst = dst[:0]
	for _, p := range c.keyPos[:c.nCluster] {
		dst = append(dst, entry[p])
	}
	return dst
}

// Types are the entry fields' types in EntrySchema order.
func (c *EntryCodec) Types() []iceberg.Type { return c.types }
