// Package planner answers questions through index snapshots. A lookup is a
// predicate (Parse: =, IN, <, <=, >, >=, BETWEEN, IS [NOT] NULL and AND of
// them) on source columns or index fields. Conditions on a source column
// are projected through the cluster expressions the way Iceberg projects
// filters through partition transforms: identity, truncate, year, month,
// day and hour keep order and carry ranges, bucket carries = and IN. The
// tracking file is binary-searched by group_max_value for the resulting
// clustering-key ranges, range files and row groups are skipped by their
// statistics, and rows are filtered exactly on the stored values.
//
// The answer (Arrow record batches of the stored fields, and for an index
// with _file and _pos the matching positions per data file as roaring
// bitmaps) is exact for the requested table snapshot: an index snapshot
// built for an ancestor is reconciled with the deletes and data files
// committed since. An index of a type the planner does not implement is
// ignored, as the spec requires: the lookup scans the table instead and
// its plan says so.
//
// The predicate language is predicate*.go: the syntax tree and parser, and
// the conversion of literals to the column's type.
//
// Concurrency: a Planner is safe for concurrent use. Index files are read
// through the objstore.Store in Options, whose cache of decoded tracking
// files every lookup of the process shares.
package planner
