// Package ingest turns the outside world into deltas of source snapshots. It
// consumes the two Kafka feeds (commit notifications: streamidx's native JSON
// record or the Iceberg Kafka Connect control topic; change events: Debezium
// envelopes or native JSON rows), polls the catalog when there is no commit
// topic, and computes the table delta of a source snapshot from its manifests:
// added and removed data files, position deletes, deletion vectors and
// equality deletes, resolved to the index entries they add or remove.
// Records it cannot decode go to a dead-letter topic with the reason.
//
// Concurrency: a consumer is one goroutine started by Run(ctx); deltas are
// handed to staging in source-commit order per table.
package ingest
