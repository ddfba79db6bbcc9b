// Package updater keeps one index aligned with its source table. It is the
// conductor of the pipeline: for each new source snapshot it computes the
// table delta (ingest), stages it durably (staging), merges it into the
// range files it touches (compactor) and publishes the index snapshot with a
// compare-and-swap (flush). A crash at any point leaves a state the next Step
// completes: sealed stages are reused, partial ones redone, and an index
// snapshot that was published is never published twice, because every update
// names the index snapshot it was built on.
//
// Step returns Stats instead of touching metrics, so that whoever drives the
// updater (the daemon, `streamidx run --once`, a test) decides what to count;
// IsHalt sorts its errors into those a retry can fix and those it cannot.
// BuildAndPublish is the one full build path, shared with `streamidx build`.
//
// Concurrency: an Updater belongs to one goroutine. Several Updaters (in one
// process or many) may serve the same index; the compare-and-swap decides,
// and a loser's update is void and recomputed on the winner.
package updater
