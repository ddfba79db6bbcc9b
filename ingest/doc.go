// Package ingest turns what changed in a source table into index entry
// mutations, and decodes the records of the feeds that announce changes. It
// does no Kafka I/O and keeps no metrics: the daemon's consumer reads the
// commit topic and hands each record to DecodeNotification, and callers turn
// the DeltaStats that ComputeDelta returns into whatever they count.
//
// ComputeDelta is the table delta of a source snapshot, computed from its
// manifests against an earlier snapshot: entries of added data files, of
// removed ones, and of rows whose position deletes, deletion vectors or
// equality deletes changed (equality deletes by the spec's sequence-number
// and partition rules, resolved through an index when an EqualityResolver
// can, else by reading the candidate data files). DecodeNotification reads
// streamidx's native commit notification and refuses anything else, so the
// transport can send it to a dead-letter topic with the reason.
//
// Concurrency: ComputeDelta runs in the calling goroutine and calls its sink
// from it; calls on distinct inputs may run in parallel.
package ingest
