// Package staging holds mutations of index entries (inserts and deletes)
// between their arrival and their compaction, in a Pebble LSM keyed by the
// order-preserving encoding of the clustering key followed by the entry's
// identity and location, so that Pebble's order is the spec's cluster order.
// Mutations are sealed per source snapshot; a sealed delta streams out in key
// order. Staging survives kill -9: what was acknowledged is on disk. It also
// sorts the entries of a full build, spilling beyond a memory budget.
//
// Concurrency: writers append through one batch at a time; sealed deltas are
// read by the compactor while new mutations arrive.
package staging
