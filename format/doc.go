// Package format is the proposed Apache Iceberg Index Spec as code: the
// index metadata model and its JSON, validation of a definition against a
// source schema, value expressions and their transforms evaluated over Arrow
// batches, the order-preserving byte encoding of clustering keys, and the
// codecs of range files (Parquet) and tracking files (Avro). README.md in
// this directory describes every file byte by byte where the layout is
// streamidx's own, and each choice the spec leaves open.
//
// Concurrency: values of this package are immutable once built, except the
// file writers and readers, which belong to one goroutine each.
package format
