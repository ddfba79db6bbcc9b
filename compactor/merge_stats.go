package compactor

import (
	"github.com/streamidx/streamidx/format"
)

// outputBounds gathers, for one file a merge writes, what its statistics of
// non-materialized fields that cannot be computed from stored fields rest
// on: the replaced files that kept entries in it, and the values of the
// entries inserted into it.
type outputBounds struct {
	files        map[int]bool // indexes in prev
	lower, upper []any        // by position in merger.opaque
}

func (m *merger) newOutputBounds() *outputBounds {
	if len(m.opaque) == 0 {
		return nil
	}
	return &outputBounds{files: map[int]bool{}, lower: make([]any, len(m.opaque)), upper: make([]any, len(m.opaque))}
}

// observe notes one entry written to the file; oldFile is the file of prev
// it came from, or -1.
func (o *outputBounds) observe(m *merger, entry format.Key, oldFile int) {
	if oldFile >= 0 {
		o.files[oldFile] = true
	}
	for k, pos := range m.opaque {
		v := entry[pos]
		if v == nil || format.IsNaN(v) {
			continue
		}
		t := m.fields[pos].Type
		if o.lower[k] == nil || format.Compare(t, v, o.lower[k]) < 0 {
			o.lower[k] = v
		}
		if o.upper[k] == nil || format.Compare(t, v, o.upper[k]) > 0 {
			o.upper[k] = v
		}
	}
}

// apply replaces the writer's statistics of those fields in te, which saw
// only nulls for entries read back from range files: the bounds become the
// union of the replaced files' bounds and the inserted values, not tight;
// the null and NaN counts are unknown. A replaced file without bounds for a
// field that may hold values makes the bounds unknown.
func (o *outputBounds) apply(m *merger, te *format.TrackingEntry) {
	for k, pos := range m.opaque {
		f := m.fields[pos]
		lo, hi, known := o.lower[k], o.upper[k], true
		for idx := range o.files {
			st := m.prev[idx].Stats[f.ID]
			switch {
			case st == nil:
				known = false
			case st.LowerBound != nil && st.UpperBound != nil:
				if lo == nil || format.Compare(f.Type, st.LowerBound, lo) < 0 {
					lo = st.LowerBound
				}
				if hi == nil || format.Compare(f.Type, st.UpperBound, hi) > 0 {
					hi = st.UpperBound
				}
			case !holdsNoValues(st):
				known = false
			}
		}
		values := te.RecordCount
		fs := &format.FieldStats{ValueCount: &values}
		if known && lo != nil {
			tight := false
			fs.LowerBound, fs.UpperBound, fs.TightBounds = lo, hi, &tight
		}
		te.Stats[f.ID] = fs
	}
}

// holdsNoValues reports whether statistics without bounds say that every
// value is null or NaN, rather than that the bounds are unknown.
func holdsNoValues(st *format.FieldStats) bool {
	if st.ValueCount == nil || st.NullValueCount == nil {
		return false
	}
	var nans int64
	if st.NanValueCount != nil {
		nans = *st.NanValueCount
	}
	return *st.NullValueCount+nans == *st.ValueCount
}
