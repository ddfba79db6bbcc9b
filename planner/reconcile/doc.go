// Package reconcile makes the source.Table of a table iceberg-go loaded:
// besides its metadata, it reads the manifests, delete files and data
// files that correct the answer of an index snapshot built for an older
// table snapshot, and that answer a lookup through an index of a type the
// planner does not implement (a scan of the table).
//
// Concurrency: a Table and the reconcilers it returns are safe for
// concurrent use; a reconciler kept in the lookup cache keeps what it
// learns under its own locks.
package reconcile
