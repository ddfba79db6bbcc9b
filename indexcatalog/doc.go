// Package indexcatalog owns the index catalog: the map from (table, index
// name) to the location of the index's current metadata file, and the atomic
// compare-and-swap that commits a new metadata file on top of the one a
// writer started from (Index Spec, "Commits and Concurrency"). It also owns
// the metadata files themselves and the metadata log that each commit keeps.
//
// Two implementations share the Catalog interface:
//
//   - SQLCatalog keeps one row per index in the table streamidx_indexes,
//     in the same database as the Iceberg SQL catalog, and swaps with
//     UPDATE ... WHERE metadata_location = <base>. It works on SQLite and
//     Postgres, and on any storage that iceberg-go's IO can write.
//   - FSCatalog needs no database: an index is the directory
//     <root>/<namespace...>/<table>/indexes/<name>, and its current metadata
//     file is the highest-numbered metadata/v<N>.metadata.json. A commit
//     creates v<N+1> only if it is absent, so exactly one writer wins each
//     version. The indexes of a table are the directories under its indexes/
//     directory that hold at least one version file. Conditional create is
//     done with link(2) on a local file system and with an If-None-Match: *
//     put on S3-compatible object stores (a 412 is the lost race); a store
//     that ignores If-None-Match would let two writers both win, so use the
//     SQL catalog there.
//
// Metadata files are immutable and uniquely named, and are read, published
// and deleted through the process's storage gateway (internal/objstore). On
// a local file system they are written to a temporary name, fsynced,
// published under their final name (by the FS catalog without replacing
// anything: that is its commit) and their directory is fsynced; elsewhere
// they are written with one put (conditional for the FS catalog's versions).
//
// Concurrency: every catalog is safe for use by many goroutines, and many
// processes may share one database or root directory. A commit whose base is
// no longer current fails with ErrCommitConflict and leaves no trace of its
// new state; CommitWithRetry re-reads the winner and re-applies the update.
// In the FS catalog, with delete-after-commit enabled, a writer that listed
// the metadata directory and is then overtaken by more than
// write.metadata.previous-versions-max commits before it publishes could
// re-create a deleted version name; a version check before publishing makes
// that window a few milliseconds wide, and the SQL catalog has no such window.
package indexcatalog
