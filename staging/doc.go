// Package staging keeps index entry mutations durably between their
// computation and their merge into range files: a Pebble database with a
// write-ahead log, one per process.
//
// Stages. A stage is the delta of one source snapshot on top of one index
// snapshot; its mutations are entry records (format.EntryCodec) with signed
// counts, keyed so that Pebble's order is the spec's cluster order, and
// identical entries' counts are summed by a merge operator. A stage is
// sealed once its delta is complete and then streams out in key order; what
// Seal acknowledged survives kill -9, and stages still open at start are
// abandoned and recomputed (format/README.md has the key layout). A
// recomputable stage (a table delta, which the table's files give again) is
// held in the process instead, within a memory budget, and moves to Pebble
// only when it outgrows it (memStage). A Pipe feeds a Stager from another
// goroutine, so that a delta is computed while its earlier mutations are
// written.
//
// Change events (events.go). An index fed by change events stages each
// event's mutations as it arrives, keyed by its topic, partition and offset
// (a redelivered event writes the same keys), together with the range of
// offsets staged per partition. A commit notification names the offsets its
// commit covers; the events up to them are moved into an ordinary stage,
// sealed and merged like a table delta, and dropped from the event space.
//
// Concurrency: a Store is safe for concurrent use; sealed stages are read
// while new ones are written. A Stager belongs to one goroutine, and so
// does a Pipe: its writer goroutine is its own, and Close hands the Stager
// back to the caller.
package staging
