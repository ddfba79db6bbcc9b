package updater

import (
	"time"

	"github.com/apache/iceberg-go/table"
)

// Stats say what one Step did. The daemon turns them into metrics.
type Stats struct {
	// Aligned is true when the index covers the table's current snapshot
	// (as the step loaded it) after the step: there is nothing more to do
	// until the table changes.
	Aligned bool
	// Table is the table as the step loaded it; nil when loading failed.
	Table *table.Table
	// IndexedSnapshotID is the source snapshot of the index's current
	// snapshot after the step; 0 when the index has none.
	IndexedSnapshotID int64
	// Published describes the index snapshot the step published; nil when
	// it published none.
	Published *Publication
	// CommitConflicts counts updates voided because another writer moved
	// the index first; CommitRetries counts compare-and-swap attempts
	// repeated on top of another writer's commit.
	CommitConflicts, CommitRetries int
	// SnapshotsExpired and FilesDeleted are what expiry removed.
	SnapshotsExpired, FilesDeleted int
	// Paused is how long the step's merge or build waited for shorter
	// updates of other indexes (Options.Gate).
	Paused time.Duration
	// Waiting says why an events-fed index cannot move now (its next
	// commit's notification or events have not arrived); "" otherwise. The
	// step is to be tried again when the feed moves.
	Waiting string
}

// Publication describes one published index snapshot.
type Publication struct {
	SourceSnapshotID int64
	// SourceCommitted is when the source snapshot was committed (its
	// timestamp-ms), Committed when the index snapshot was: the difference
	// is the index's lag for that snapshot.
	SourceCommitted, Committed time.Time
	// Took is the time from the start of the update to its commit; of it,
	// an incremental update spent Staged computing and staging the delta
	// (0 when it was staged ahead), Merged rewriting range files and
	// Published committing the index snapshot.
	Took                      time.Duration
	Staged, Merged, Published time.Duration
	// FullBuild is true when every live row was indexed anew.
	FullBuild bool
	// StagedMutations are the delta's entry mutations staged by this update
	// (0 when a stage sealed by an earlier run was reused, and for builds).
	StagedMutations int64
	// EqualitySlowPathFiles are data files read in full to resolve equality
	// deletes.
	EqualitySlowPathFiles int
	// FilesWritten, FilesRewritten and FilesReused count range files written,
	// replaced and carried over unchanged; BytesWritten is the size of those
	// written.
	FilesWritten, FilesRewritten, FilesReused int
	BytesWritten                              int64
	// EntriesRewritten counts the entries decoded and written to new range
	// files; EntriesCopied those of the row groups copied into them as
	// they were (RowGroupsCopied), not decoded.
	EntriesRewritten, EntriesCopied int64
	RowGroupsCopied                 int
	// Skipped counts the source snapshots between the previously indexed
	// one and this one that got no index snapshot of their own (policy
	// latest or adaptive).
	Skipped int
}

// Lag is the time from the source commit to the index commit.
func (p *Publication) Lag() time.Duration { return p.Committed.Sub(p.SourceCommitted) }
