package format

import "github.com/apache/iceberg-go"

// Reserved field IDs of the Iceberg table spec that index definitions meet.
const (
	FieldIDFile      = 2147483646 // _file: string, the data file's location
	FieldIDPos       = 2147483645 // _pos: long, the row's ordinal in its data file
	FieldIDDeleted   = 2147483644 // _deleted: boolean
	FieldIDSpecID    = 2147483643 // _spec_id: int
	FieldIDPartition = 2147483642 // _partition: struct

	FieldIDDeleteFilePath = 2147483546 // file_path of a position delete file
	FieldIDDeletePos      = 2147483545 // pos of a position delete file
	FieldIDDeleteRow      = 2147483544 // row of a position delete file

	FieldIDChangeType       = 2147483543 // _change_type
	FieldIDChangeOrdinal    = 2147483542 // _change_ordinal
	FieldIDCommitSnapshotID = 2147483541 // _commit_snapshot_id

	FieldIDRowID                     = 2147483540 // _row_id: long
	FieldIDLastUpdatedSequenceNumber = 2147483539 // _last_updated_sequence_number: long

	// reservedFieldIDFloor is the lowest reserved ID listed above.
	reservedFieldIDFloor = FieldIDLastUpdatedSequenceNumber
)

// Names of the metadata columns.
const (
	NameFile                      = "_file"
	NamePos                       = "_pos"
	NameSpecID                    = "_spec_id"
	NameRowID                     = "_row_id"
	NameLastUpdatedSequenceNumber = "_last_updated_sequence_number"
	NamePartition                 = "_partition"
)

// MaxIndexFieldID is the largest index field ID: the stats struct ID
// 10000 + 200 * id must stay below 200,000,000.
const MaxIndexFieldID = (200_000_000 - 10_000 - 1) / 200

// Content stats layout: the stats struct of index field f has field ID
// StatsBaseID(f), and each metric sits at base + its offset.
const (
	StatsLowerBound     = 1 // the field's type
	StatsUpperBound     = 2 // the field's type
	StatsTightBounds    = 3 // boolean
	StatsValueCount     = 4 // long
	StatsNullValueCount = 5 // long
	StatsNanValueCount  = 6 // long
	StatsAvgValueSize   = 7 // int
	StatsGroupMaxValue  = 8 // the field's type; null means a null clustering value
)

// Tracking file entry field IDs.
const (
	TrackingFieldFilePath        = 100
	TrackingFieldFileFormat      = 101
	TrackingFieldRecordCount     = 103
	TrackingFieldFileSizeInBytes = 104
	TrackingFieldKeyMetadata     = 131
	TrackingFieldContentStats    = 146
)

// StatsBaseID is the field ID of the content stats struct of index field f.
func StatsBaseID(f int) int { return 10000 + 200*f }

// IsReservedFieldID reports whether id is in the range the table spec
// reserves for metadata columns.
func IsReservedFieldID(id int) bool { return id >= reservedFieldIDFloor }

// IsLocationField reports whether id is one of the metadata columns that
// locate a row in a data file: _file or _pos.
func IsLocationField(id int) bool { return id == FieldIDFile || id == FieldIDPos }

// MetadataColumn returns the name and type of a metadata column that an
// index expression may reference, and whether id is one. _deleted, the
// change-log columns and the delete-file columns are not among them.
func MetadataColumn(id int) (string, iceberg.Type, bool) {
	switch id {
	case FieldIDFile:
		return NameFile, iceberg.PrimitiveTypes.String, true
	case FieldIDPos:
		return NamePos, iceberg.PrimitiveTypes.Int64, true
	case FieldIDSpecID:
		return NameSpecID, iceberg.PrimitiveTypes.Int32, true
	case FieldIDRowID:
		return NameRowID, iceberg.PrimitiveTypes.Int64, true
	case FieldIDLastUpdatedSequenceNumber:
		return NameLastUpdatedSequenceNumber, iceberg.PrimitiveTypes.Int64, true
	}
	return "", nil, false
}
