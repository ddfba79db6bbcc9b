package indexcatalog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamidx/streamidx/format"
)

// defaultPreviousVersionsMax is the metadata log length when the index sets
// no write.metadata.previous-versions-max, as for Iceberg tables.
const defaultPreviousVersionsMax = 100

// pendingCommit is the metadata file a commit is about to write, and the
// metadata files its log no longer names.
type pendingCommit struct {
	md      format.Metadata
	data    []byte
	trimmed []string
}

// prepareCommit builds the metadata file that replaces base: md with base
// appended to its metadata log, the log trimmed to the index's limit, and
// last-updated-ms set to now. md itself is not changed. baseMd is nil when
// base is corrupt: only a rollback, which names the file itself, commits
// on top of one.
func prepareCommit(md *format.Metadata, base string, baseMd *format.Metadata, now time.Time) (*pendingCommit, error) {
	if err := checkWritable(md); err != nil {
		return nil, err
	}
	if baseMd != nil && md.IndexUUID != baseMd.IndexUUID {
		return nil, fmt.Errorf("metadata of index-uuid %s cannot replace %s of index-uuid %s", md.IndexUUID, base, baseMd.IndexUUID)
	}
	limit, err := previousVersionsMax(md.Properties)
	if err != nil {
		return nil, err
	}
	log := slices.Clone(md.MetadataLog)
	// A corrupt base (replaced by a rollback) is not logged: it is no state
	// to return to, and its last-updated-ms is unknown.
	if n := len(log); baseMd != nil && (n == 0 || log[n-1].MetadataFile != base) {
		log = append(log, format.MetadataLogEntry{MetadataFile: base, TimestampMs: baseMd.LastUpdatedMs})
	}
	var dropped []format.MetadataLogEntry
	if extra := len(log) - limit; extra > 0 {
		dropped, log = log[:extra], log[extra:]
	}
	var trimmed []string
	for _, e := range dropped {
		stillNamed := slices.ContainsFunc(log, func(k format.MetadataLogEntry) bool { return k.MetadataFile == e.MetadataFile })
		// Another writer may have logged a path relative to the location.
		file, err := format.ResolvePath(md.Location, e.MetadataFile)
		if !stillNamed && err == nil && !slices.Contains(trimmed, file) {
			trimmed = append(trimmed, file)
		}
	}
	p := &pendingCommit{md: *md, trimmed: trimmed}
	p.md.MetadataLog = log
	p.md.LastUpdatedMs = now.UnixMilli()
	if p.data, err = p.md.MarshalJSON(); err != nil {
		return nil, fmt.Errorf("write index metadata: %w", err)
	}
	return p, nil
}

// prepareCreate builds the first metadata file of an index.
func prepareCreate(md *format.Metadata, now time.Time) (*pendingCommit, error) {
	if err := checkWritable(md); err != nil {
		return nil, err
	}
	p := &pendingCommit{md: *md}
	p.md.LastUpdatedMs = now.UnixMilli()
	var err error
	if p.data, err = p.md.MarshalJSON(); err != nil {
		return nil, fmt.Errorf("write index metadata: %w", err)
	}
	return p, nil
}

// checkWritable refuses metadata that readMetadata would refuse, so the
// catalog never writes a file it could not read back: another format
// version, or a SCALAR index that breaks a rule of the spec.
func checkWritable(md *format.Metadata) error {
	if md.FormatVersion != format.FormatVersion {
		return fmt.Errorf("write index metadata: format-version %d: this streamidx writes only version %d", md.FormatVersion, format.FormatVersion)
	}
	if !md.Supported() {
		return nil
	}
	if err := format.Validate(md, nil); err != nil {
		return fmt.Errorf("write index metadata: %w", err)
	}
	return nil
}

// apply copies what the commit wrote into the caller's metadata.
func (p *pendingCommit) apply(md *format.Metadata) {
	md.LastUpdatedMs = p.md.LastUpdatedMs
	md.MetadataLog = p.md.MetadataLog
	md.Location = p.md.Location
}

// deleteTrimmed reports whether the commit deletes the files it trimmed
// from the metadata log.
func deleteTrimmed(props map[string]string) bool {
	return strings.EqualFold(props[format.PropDeleteAfterCommit], "true")
}

// previousVersionsMax reads the metadata log limit; like Iceberg tables, a
// limit below one keeps one entry.
func previousVersionsMax(props map[string]string) (int, error) {
	v, ok := props[format.PropPreviousVersionsMax]
	if !ok {
		return defaultPreviousVersionsMax, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("index property %s=%q: not an integer", format.PropPreviousVersionsMax, v)
	}
	return max(n, 1), nil
}
