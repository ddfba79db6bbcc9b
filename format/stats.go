package format

// FieldStats are the content statistics of one index field over the entries
// of one range file. Unset metrics are nil. For a cluster field GroupMax is
// the field's value in the file's last entry; there, unlike elsewhere, a nil
// value is a null clustering value, so HasGroupMax says whether it is set.
type FieldStats struct {
	LowerBound     any // the field's canonical Go value; nil when unknown or all null
	UpperBound     any
	TightBounds    *bool
	ValueCount     *int64
	NullValueCount *int64
	NanValueCount  *int64
	AvgValueSize   *int32
	GroupMax       any
	HasGroupMax    bool
}

// TrackingEntry describes one range file of an index snapshot.
type TrackingEntry struct {
	FilePath        string
	FileFormat      string // "parquet"
	RecordCount     int64
	FileSizeInBytes int64
	Stats           map[int]*FieldStats // by index field ID
	KeyMetadata     []byte
}

// GroupMaxKey returns the clustering key of the last entry of the range file:
// the group_max_value metrics of the cluster fields in cluster-spec order.
// It reports false when a cluster field has no group_max_value.
func (e *TrackingEntry) GroupMaxKey(s *IndexSchema) (Key, bool) {
	fields := s.ClusterFields()
	k := make(Key, len(fields))
	for i, f := range fields {
		st := e.Stats[f.ID]
		if st == nil || !st.HasGroupMax {
			return nil, false
		}
		k[i] = st.GroupMax
	}
	return k, true
}
