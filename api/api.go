// Package api is the vocabulary of the lookup service's HTTP API: the
// bodies it takes and answers, its media types and response headers. The
// service (package serve), the Go client (package client) and the CLI's
// `list --json` and `inspect --json` share it.
//
// It imports only the standard library, so that a program that only asks
// the service (package client, cmd/streamidx-client) does not link
// iceberg-go's table and catalog packages and their package
// initialisation (about 76 ms and 32 MB of allocations at every start of
// a process, with iceberg-go v0.7.0).
package api

// ArrowStream is the media type of Arrow IPC stream answers.
const ArrowStream = "application/vnd.apache.arrow.stream"

// NDJSON is the media type of JSON-lines answers, the default.
const NDJSON = "application/x-ndjson"

// Response headers that name the snapshots of an answer.
const (
	HeaderIndexSnapshot = "Streamidx-Index-Snapshot"
	HeaderTableSnapshot = "Streamidx-Table-Snapshot"
)

// LookupRequest is the JSON body of a POST lookup; a GET takes the same
// fields as query parameters.
type LookupRequest struct {
	// Where is the predicate, in the language of `lookup --where`.
	Where string `json:"where"`
	// Snapshot is the table snapshot the answer must be exact for; 0 is
	// the table's current one.
	Snapshot int64 `json:"snapshot,omitempty"`
	// Limit stops after this many rows; 0 means no limit (up to the
	// service's row limit).
	Limit int64 `json:"limit,omitempty"`
	// Explain adds the plan and what was read as the last line.
	Explain bool `json:"explain,omitempty"`
}

// Header is the first line of a JSON-lines answer.
type Header struct {
	Table string `json:"table"`
	Index string `json:"index"`
	// IndexSnapshotID is the one index snapshot the answer was read from;
	// SourceSnapshotID the table snapshot it was built for.
	IndexSnapshotID  int64 `json:"index_snapshot_id"`
	SourceSnapshotID int64 `json:"source_snapshot_id"`
	// TableSnapshotID is the table snapshot the answer is exact for;
	// CommitsBehind the commits between it and SourceSnapshotID, which
	// the lookup reconciled.
	TableSnapshotID int64 `json:"table_snapshot_id"`
	CommitsBehind   int   `json:"commits_behind"`
	Rows            int64 `json:"rows"`
	// Truncated: the lookup stopped at the request's limit.
	Truncated bool `json:"truncated"`
}

// HeaderLine is how the header line is wrapped, so that it cannot be
// taken for a row.
type HeaderLine struct {
	Streamidx Header `json:"streamidx"`
}

// ErrorBody is the JSON body of every answer other than 200.
type ErrorBody struct {
	Error string `json:"error"`
	// Code is the service's word for the error, such as bad_predicate,
	// too_many_rows or no_such_index.
	Code string `json:"code"`
}

// IndexList is the answer of GET /v1/tables/{table}/indexes.
type IndexList struct {
	Table   string       `json:"table"`
	Indexes []IndexEntry `json:"indexes"`
}

// IndexEntry is one index in a table's list, as `streamidx list --json`
// prints it. An index whose metadata cannot be loaded has Broken set to
// the reason and Type BROKEN.
type IndexEntry struct {
	Index            string `json:"index"`
	Type             string `json:"type"`
	Snapshots        int    `json:"snapshots"`
	SourceSnapshotID *int64 `json:"source_snapshot_id"` // of the current index snapshot; null before the first
	// CommitsBehind is how many commits of the table's current history
	// follow SourceSnapshotID (0: the index is current); null when the
	// index has no snapshot, or its source snapshot is not in that history
	// (the table was rolled back past it).
	CommitsBehind    *int   `json:"commits_behind"`
	MetadataLocation string `json:"metadata_location"`
	Broken           string `json:"broken,omitempty"`
}

// Inspection describes an index and the range files of one of its
// snapshots: the answer of GET /v1/tables/{table}/indexes/{index} and the
// stable JSON of `streamidx inspect --json`. Values of index fields are
// strings in the CLI's rendering of values, or null.
type Inspection struct {
	Table            string             `json:"table"`
	Index            string             `json:"index"`
	MetadataLocation string             `json:"metadata_location"`
	IndexUUID        string             `json:"index_uuid"`
	TableUUID        string             `json:"table_uuid"`
	Type             string             `json:"type"`
	Location         string             `json:"location"`
	Supported        bool               `json:"supported"`
	Fields           []Field            `json:"fields"`
	Properties       map[string]string  `json:"properties"`
	Snapshots        []Snapshot         `json:"snapshots"`
	CurrentSnapshot  *int64             `json:"current_snapshot_id"`
	Tracking         *Tracking          `json:"tracking"`
	MetadataLog      []MetadataLogEntry `json:"metadata_log"`
}

// Field is one index field.
type Field struct {
	ID              int    `json:"id"`
	Name            string `json:"name"`
	Kind            string `json:"kind"`
	Type            string `json:"type"`
	Expr            string `json:"expr,omitempty"`
	ClusterPosition int    `json:"cluster_position,omitempty"` // 1-based; 0 when not clustered
}

// Snapshot is one index snapshot.
type Snapshot struct {
	SnapshotID            int64             `json:"snapshot_id"`
	SourceTableSnapshotID int64             `json:"source_table_snapshot_id"`
	TimestampMs           int64             `json:"timestamp_ms"`
	TrackingFile          string            `json:"tracking_file"`
	Properties            map[string]string `json:"properties,omitempty"`
}

// Tracking is the tracking file of the inspected index snapshot.
type Tracking struct {
	SnapshotID   int64       `json:"snapshot_id"`
	TrackingFile string      `json:"tracking_file"`
	RangeFiles   []RangeFile `json:"range_files"`
	Records      int64       `json:"records"`
	Bytes        int64       `json:"bytes"`
}

// RangeFile is one entry of a tracking file.
type RangeFile struct {
	FilePath        string            `json:"file_path"`
	FileFormat      string            `json:"file_format"`
	RecordCount     int64             `json:"record_count"`
	FileSizeInBytes int64             `json:"file_size_in_bytes"`
	GroupMax        []*string         `json:"group_max"`
	Bounds          map[string]Bounds `json:"bounds"` // by field ID
}

// Bounds are a field's lower and upper bounds in a range file.
type Bounds struct {
	Lower *string `json:"lower"`
	Upper *string `json:"upper"`
}

// MetadataLogEntry is one entry of the index metadata's log, with the
// index spec's names.
type MetadataLogEntry struct {
	MetadataFile string `json:"metadata-file"`
	TimestampMs  int64  `json:"timestamp-ms"`
}
