// Package compactor merges a sealed delta with the range files it touches and
// carries every other range file of the previous index snapshot over
// unchanged. It finds affected files by binary search on group_max_value and
// merge-joins each with its mutations: rows between changed keys go through
// as slices of Arrow batches, and only the entries of changed keys are
// decoded. Builds and merges size range files by one rule (RangeWriter):
// near the target, between half and one and a half of it, split only where
// the clustering key changes, so the cost of an update follows the size of
// the change and of the files it touches, not the size of the index.
//
// Concurrency: one compaction per index at a time; the inputs are immutable.
// A merge rewrites parts of the index on several goroutines of its own, all
// ended before it returns; a RangeWriter belongs to one goroutine.
// A full build runs its own goroutines (scan workers, the merge, decoders)
// and returns after they all ended.
package compactor
