// Package planner reads index snapshots to answer questions: point, IN and
// range lookups on the clustering key (predicates on source columns are
// projected through the cluster expressions), equality deletes turned into
// row positions per data file, and reconciliation of an index snapshot that
// lags the table snapshot being read.
//
// Concurrency: a Planner is safe for concurrent use; decoded tracking files
// are cached by path because they are immutable.
package planner
