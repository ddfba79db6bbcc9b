// Package daemon is the long-running process of `streamidx run`: it keeps
// a set of indexes aligned with their tables as commits arrive. It is built
// from a table catalog, an index catalog, the configuration, a logger and a
// Prometheus registerer, so that it can be embedded and tested without the
// command line.
//
// The process is a run group of actors, each with an execute and an
// interrupt: the commit-notification consumer (Kafka, when configured), the
// workers (one per index, each driving an updater.Updater), and the HTTP
// server (/metrics, /healthz, /readyz). Signals are the caller's business:
// Run returns when its context ends, after stopping the actors in that
// order.
//
// Notifications never wait for work. The consumer records each one in a
// ledger and wakes every worker of its table at once; workers never wait for
// one another and run in parallel up to run.max-parallel-updates. The
// ledger commits a partition's offset up to its first notification that not
// every index covers yet, sends one whose snapshot does not appear in the
// table's history within run.kafka.notification-timeout to the dead-letter
// topic, and gives each index snapshot the properties of the newest
// notification it covers.
//
// The updater returns stats per step; this package alone turns them into
// Prometheus metrics. A worker whose index hits an error retrying cannot fix
// (updater.IsHalt: a corrupt file, a replaced index) stops, logs the file,
// sets streamidx_updater_halted and makes /readyz fail, while the other
// workers go on; other errors are retried with capped, jittered exponential
// backoff.
//
// With run.rewrite-deletes, each table's equality deletes are rewritten
// into position deletes beside its workers (rewrite.go): one rewrite per
// table at a time, started after a worker publishes, planned on what that
// worker's index covers, so that no update waits for a rewrite.
//
// Concurrency: New, Run and Close are called from one goroutine; Close may
// also be called from another to end Run. Everything else is internal.
package daemon
