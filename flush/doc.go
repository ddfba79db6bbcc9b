// Package flush publishes index snapshots and cleans up after them.
//
// Publish takes range files already written and durable, writes the
// tracking file that lists them (naming the index and the snapshot it
// belongs to, so that it cannot pass for another's), and commits a new
// index snapshot that references it with a compare-and-swap in the index
// catalog, retrying on top of concurrent winners. Properties the caller
// passes in, such as the feed positions the daemon records, go into the
// snapshot. An update built on a snapshot that is no longer current is void
// (ErrBaseMoved); a commit that fails removes its tracking file.
//
// Expire removes old index snapshots from the metadata and deletes the
// range and tracking files that no remaining snapshot references, sparing
// files young enough that a concurrent writer may be about to commit them.
//
// Concurrency: commits to one index are serialised by the catalog's
// compare-and-swap, not by locks, so several processes may share an index.
package flush
