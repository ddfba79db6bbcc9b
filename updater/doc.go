// Package updater keeps one index aligned with its source table. It is the
// conductor of the pipeline: for each new source snapshot it computes the
// table delta (ingest), stages it durably (staging), merges it into the
// range files it touches (compactor) and publishes the index snapshot with a
// compare-and-swap (flush). A crash at any point leaves a state the next Step
// completes: sealed stages are reused, partial ones redone, and an index
// snapshot that was published is never published twice, because every update
// names the index snapshot it was built on.
//
// A step overlaps its publication with the next step's staging: once the
// merge for source snapshot S is written, the id of the index snapshot that
// will hold it is chosen, and while that snapshot commits, the delta of the
// snapshot after S (when it is known and the policy will index it next) is
// staged under that id's name, on top of the range files just written. The
// step returns when both are done. If the commit fails, the stage is
// dropped; a crash leaves it under the name of a snapshot that may not
// exist, where nothing ever applies it.
//
// Step returns Stats instead of touching metrics, so that whoever drives the
// updater (the daemon, `streamidx run --once`, a test) decides what to count;
// IsHalt sorts its errors into those a retry can fix and those it cannot.
// BuildAndPublish is the one full build path, shared with `streamidx build`.
//
// Concurrency: an Updater belongs to one goroutine (a step's staging ahead
// runs on its own goroutine and ends before the step returns). Several
// Updaters (in one
// process or many) may serve the same index; the compare-and-swap decides,
// and a loser's update is void and recomputed on the winner.
package updater
