// Package compactor merges a sealed delta with the range files it touches and
// carries every other range file of the previous index snapshot over
// unchanged. It finds affected files by binary search on group_max_value,
// merge-joins each with its mutations, and writes replacements split at the
// target size only where the clustering key changes, so the cost of an update
// follows the size of the change, not the size of the index.
//
// Concurrency: one compaction per index at a time; the inputs are immutable.
package compactor
