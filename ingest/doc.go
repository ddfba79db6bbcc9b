// Package ingest turns what changed in a source table into index entry
// mutations, and decodes the records of the feeds that announce changes. It
// does no Kafka I/O and keeps no metrics: the daemon's consumers read the
// topics and hand each record's value to a decoder here, and callers turn
// the DeltaStats that ComputeDelta returns into whatever they count.
//
// The table delta. ComputeDelta is the delta of a source snapshot, computed
// from its manifests against an earlier snapshot: entries of added data
// files, of removed ones, and of rows whose position deletes, deletion
// vectors or equality deletes changed (equality deletes by the spec's
// sequence-number and partition rules, resolved through an index when an
// EqualityResolver can, else by reading the candidate data files).
//
// The feeds:
//   - commit notifications: DecodeNotification reads streamidx's native
//     JSON form and refuses anything else with the reason, so the transport
//     can send the record to a dead-letter topic; DecodeControlEvent reads
//     the Apache Iceberg Kafka Connect sink's control events (Avro), of which
//     CommitToTable and DataComplete make a notification;
//   - change events: a ChangeDecoder decodes Debezium's JSON envelope
//     (debezium.go) or streamidx's native JSON form (native.go) into a
//     ChangeEvent holding only the columns an index needs (RowColumns maps
//     them to field IDs through the table's schema), and EventEntries turns
//     an event into the index's entry mutations (an update that moves a row
//     to another clustering key removes the old entry and adds the new one).
//     PeekTable reads a native event's table without decoding the rest.
//
// Concurrency: ComputeDelta reads the files only in one snapshot and the
// files whose deletes changed on two goroutines, and calls its sink from
// both, one call at a time; it returns when both are done. Calls on distinct
// inputs may run in parallel. A ChangeDecoder and an EventEntries keep
// buffers and belong to one goroutine; the Decode functions are pure.
package ingest
