// Package staging keeps table deltas durably between their computation and
// their merge into range files: a Pebble database with a write-ahead log,
// one per process. A stage is the delta of one source snapshot on top of one
// index snapshot; its mutations are entry records (format.EntryCodec) with
// signed counts, keyed so that Pebble's order is the spec's cluster order,
// and identical entries' counts are summed by a merge operator. A stage is
// sealed once its delta is complete and then streams out in key order; what
// Seal acknowledged survives kill -9, and stages still open at start are
// abandoned and recomputed (format/README.md has the key layout). A
// recomputable stage (a table delta, which the table's files give again) is
// held in the process instead, within a memory budget, and moves to Pebble
// only when it outgrows it (memStage).
//
// Concurrency: a Store is safe for concurrent use; a Stager belongs to one
// goroutine, and sealed stages are read while new ones are written.
package staging
