// Package flush publishes index snapshots: range files, then the tracking
// file, then the metadata file, then the compare-and-swap in the index
// catalog, then the Kafka offsets, which are also recorded in the index
// snapshot's properties so that a restart neither loses nor repeats a change.
// It expires old index snapshots and deletes files no snapshot references.
// A rejected swap re-reads the winner and retries on top of it.
//
// Concurrency: commits to one index are serialised by the catalog's
// compare-and-swap, not by locks, so several processes may share an index.
package flush
