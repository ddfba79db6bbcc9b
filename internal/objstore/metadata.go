package objstore

import (
	"context"
	"fmt"

	"github.com/streamidx/streamidx/format"
)

// The parsed index metadata files a Store keeps: the current ones of the
// indexes a process serves and updates, and the bases of their commits. A
// file is counted by its size; parsed, it takes a few times that.
const (
	metadataCacheFiles = 32
	metadataCacheBytes = 16 << 20
)

// Metadata returns the index metadata file at location, parsed and checked
// by parse, which runs only when the Store does not hold the file parsed
// already. Metadata files are immutable once written, and an index that is
// updated every second carries an hour of snapshots (flush.ExpireOptions
// OrphanGrace), a metadata file of megabytes that its catalog, its updater
// and the lookup service would otherwise parse several times a commit.
// Each call returns a copy of its own (format.Metadata.Clone), which the
// caller may change. What parse refuses is not kept. A file that cannot be
// read comes with an error that names it.
func (s *Store) Metadata(ctx context.Context, location string, parse func(data []byte) (*format.Metadata, error)) (*format.Metadata, error) {
	key := CanonicalLocation(location)
	if md, ok := s.metadata.get(key); ok {
		return md.Clone(), nil
	}
	data, err := s.ReadFile(ctx, location)
	if err != nil {
		return nil, fmt.Errorf("read index metadata %s: %w", location, err)
	}
	md, err := parse(data)
	if err != nil {
		return md, err
	}
	s.metadata.put(key, md.Clone(), int64(len(data)))
	return md, nil
}
