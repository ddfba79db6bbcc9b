package compactor

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// modelSchema is an index schema for FuzzMergeMatchesModel with the way to
// make an entry of it and to compute a field the range files do not store.
type modelSchema struct {
	name string
	is   func(t *testing.T) *format.IndexSchema
	// entry makes the entry of cluster key k with payload choice p.
	entry func(r *rand.Rand, k int64, p int) format.Key
	// derived returns the value of a non-stored field of an entry read
	// back (whose non-stored values are nil), or false for a stored field.
	derived func(id int, read format.Key) (any, bool)
}

var modelSchemas = []modelSchema{
	{
		// Every field stored: a delete is matched by its bytes.
		name:  "long key, string payload",
		is:    testIndexSchema,
		entry: func(_ *rand.Rand, k int64, p int) format.Key { return format.Key{k, modelPayload(p)} },
	},
	{
		// A non-materialized field: entries are matched by what is stored
		// and the merge unions the field's bounds.
		name: "long key, string payload, non-materialized long",
		is:   ttlSchema,
		entry: func(_ *rand.Rand, k int64, p int) format.Key {
			return format.Key{k, modelPayload(p), k * 7}
		},
		derived: func(id int, read format.Key) (any, bool) {
			if id != 101 {
				return nil, false
			}
			return read[0].(int64) * 7, true
		},
	},
	{
		// A string key whose encoding escapes bytes, and a double payload
		// with the values whose order and statistics are special.
		name: "string key, double payload",
		is:   stringDoubleSchema,
		entry: func(_ *rand.Rand, k int64, p int) format.Key {
			return format.Key{modelStringKey(k), modelDouble(p)}
		},
	},
}

// modelPayload is one of a few payloads, so that equal entries repeat, or
// null.
func modelPayload(p int) any {
	if p%5 == 4 {
		return nil
	}
	return fmt.Sprintf("payload-%d", p%5)
}

// modelStringKey maps k to strings that order as k does and share long
// prefixes, with bytes the key encoding escapes.
func modelStringKey(k int64) string {
	return fmt.Sprintf("tenant\x00\u00ff-%020d", k)
}

func modelDouble(p int) any {
	return []any{nil, 0.0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1.5, math.Copysign(math.NaN(), -1)}[p%8]
}

// stringDoubleSchema is (s string, d double) indexed by identity s and d,
// clustered by s.
func stringDoubleSchema(t *testing.T) *format.IndexSchema {
	t.Helper()
	source := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "s", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 2, Name: "d", Type: iceberg.PrimitiveTypes.Float64},
	)
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1, 2}, ClusterSpec: []int{1}}
	return validIndexSchema(t, md, source)
}

// FuzzMergeMatchesModel merges random deltas into an index round after
// round, each round's range files the next one's input, and checks every
// index snapshot against a multiset of entries: the entries it holds, their
// cluster order across files, group_max_value, the bounds and counts of
// every field, and that a delta deleting an entry the index lacks fails
// without leaving a file. The rounds mix what the updater meets: upserts at
// the key tail and spread over the keys, several entries of one key,
// copies of one entry, deletes of whole files, records of one entry split
// in pieces whose counts add up, under random file, row group and batch
// sizes, parts merged in parallel, and row groups copied or decoded.
func FuzzMergeMatchesModel(f *testing.F) {
	for seed := range uint64(12) {
		f.Add(seed, uint8(seed*37))
	}
	f.Fuzz(func(t *testing.T, seed uint64, knobs uint8) {
		ms := modelSchemas[int(knobs)%len(modelSchemas)]
		r := rand.New(rand.NewPCG(seed, uint64(knobs)))
		x := newMergeFixture(t, ms.is(t))
		keySpace := int64(20 + r.IntN(400))
		var model []format.Key
		for range r.IntN(300) {
			model = append(model, ms.entry(r, r.Int64N(keySpace), r.IntN(16)))
		}
		target := []int64{256, 1024, 4096}[r.IntN(3)]
		x.opts.RowGroupRows = []int{3, 16, 64}[r.IntN(3)]
		x.opts.BatchRows = []int{2, 16}[r.IntN(2)]
		prev := x.write(target, model...)
		files := x.parquetFiles()
		for round := range 2 + r.IntN(5) {
			x.opts.TargetFileSize = target
			x.opts.MinFileSize = []int64{0, 1, target / 2}[r.IntN(3)]
			x.opts.ReadBatchRows = []int{1, 5, 64}[r.IntN(3)]
			x.opts.Parallelism = 1 + r.IntN(3)
			x.opts.DecodeAllRowGroups = r.IntN(4) == 0
			muts, want := modelRound(r, ms, model, keySpace)
			bad := r.IntN(8) == 0
			if bad { // an entry the index does not hold
				muts = append(muts, mut{ms.entry(r, 1<<40+r.Int64N(5), r.IntN(16)), -1})
			}
			if r.IntN(2) == 0 {
				x.opts.DeltaRecords = int64(len(muts))
			}
			res, err := x.merge(prev, muts...)
			if bad {
				if !errors.Is(err, ErrDeltaMismatch) {
					t.Fatalf("round %d: a delete of an absent entry: got %v, want ErrDeltaMismatch", round, err)
				}
				if on := x.parquetFiles(); on != files {
					t.Fatalf("round %d: the failed merge left %d range files, want the %d of before", round, on, files)
				}
				continue
			}
			if err != nil {
				t.Fatalf("round %d (%d mutations): %v", round, len(muts), err)
			}
			if got, w := x.check(res.Entries), x.storedRows(want); !slices.Equal(got, w) {
				t.Fatalf("round %d: the index holds %d entries, want %d\n got %v\nwant %v", round, len(got), len(w), got, w)
			}
			checkModelStats(t, x, ms, res.Entries)
			if files += res.Written; x.parquetFiles() != files {
				t.Fatalf("round %d: %d range files on disk, want %d", round, x.parquetFiles(), files)
			}
			prev, model = res.Entries, want
		}
	})
}

// modelRound draws one round's mutations of model and returns them with
// the entries the index must hold after them.
func modelRound(r *rand.Rand, ms modelSchema, model []format.Key, keySpace int64) ([]mut, []format.Key) {
	net := map[string]*mut{}
	var order []string
	add := func(e format.Key, n int) {
		k := entryID(e)
		if m, ok := net[k]; ok {
			m.count += n
			return
		}
		net[k] = &mut{e, n}
		order = append(order, k)
	}
	// Deletes: a random share of the entries, or a whole key range (files
	// emptied), or none.
	switch r.IntN(4) {
	case 0:
		lo := r.Int64N(keySpace)
		hi := lo + r.Int64N(keySpace/4+1)
		for _, e := range model {
			if k := modelKey(ms, e); k >= lo && k <= hi {
				add(e, -1)
			}
		}
	case 1:
	default:
		share := r.Float64() / 3
		for _, e := range model {
			if r.Float64() < share {
				add(e, -1)
			}
		}
	}
	// Inserts: at the key tail (an upsert stream), spread over the keys, or
	// beyond every key; copies of one entry now and then.
	inserts := r.IntN(60)
	tail := r.IntN(3)
	for range inserts {
		var k int64
		switch tail {
		case 0:
			k = keySpace - 1 - r.Int64N(keySpace/10+1)
		case 1:
			k = r.Int64N(keySpace)
		default:
			k = keySpace + r.Int64N(20)
		}
		n := 1
		if r.IntN(6) == 0 {
			n += 1 + r.IntN(2)
		}
		add(ms.entry(r, k, r.IntN(16)), n)
	}
	var muts []mut
	for _, k := range order {
		m := net[k]
		switch {
		case m.count == 0:
			if r.IntN(2) == 0 { // an insert and its delete in one delta
				muts = append(muts, mut{m.entry, 1}, mut{m.entry, -1})
			}
		case r.IntN(4) == 0 && (m.count > 1 || m.count < -1): // the count in pieces
			s := m.count / abs(m.count)
			muts = append(muts, mut{m.entry, s}, mut{m.entry, m.count - s})
		default:
			muts = append(muts, *m)
		}
	}
	r.Shuffle(len(muts), func(i, j int) { muts[i], muts[j] = muts[j], muts[i] })
	return muts, applyModel(model, muts)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// modelKey recovers the k an entry of ms was made from.
func modelKey(ms modelSchema, e format.Key) int64 {
	switch v := e[0].(type) {
	case int64:
		return v
	case string:
		var k int64
		fmt.Sscanf(v[len(v)-20:], "%d", &k)
		return k
	}
	panic(fmt.Sprintf("key %v", e[0]))
}

// checkModelStats checks the statistics of each range file against what it
// holds: every non-null, non-NaN value within the bounds (and equal to them
// where they say they are tight), and the value, null and NaN counts.
func checkModelStats(t *testing.T, x *mergeFixture, ms modelSchema, entries []format.TrackingEntry) {
	t.Helper()
	for _, te := range entries {
		rows := x.readFile(te)
		for i, f := range x.is.Fields() {
			st := te.Stats[f.ID]
			if st == nil {
				continue
			}
			var lo, hi any
			var nulls, nans int64
			for _, row := range rows {
				v := row[i]
				if !f.Stored() {
					if ms.derived == nil {
						continue
					}
					d, ok := ms.derived(f.ID, row)
					if !ok {
						continue
					}
					v = d
				}
				switch {
				case v == nil:
					nulls++
					continue
				case isNaN(v):
					nans++
					continue
				}
				if st.LowerBound != nil && format.Compare(f.Type, v, st.LowerBound) < 0 ||
					st.UpperBound != nil && format.Compare(f.Type, v, st.UpperBound) > 0 {
					t.Fatalf("%s: field %d value %v outside its bounds [%v, %v]", te.FilePath, f.ID, v, st.LowerBound, st.UpperBound)
				}
				if lo == nil || format.Compare(f.Type, v, lo) < 0 {
					lo = v
				}
				if hi == nil || format.Compare(f.Type, v, hi) > 0 {
					hi = v
				}
			}
			if st.TightBounds != nil && *st.TightBounds && f.Stored() &&
				(lo != nil && (st.LowerBound == nil || format.Compare(f.Type, lo, st.LowerBound) != 0 || format.Compare(f.Type, hi, st.UpperBound) != 0)) {
				t.Fatalf("%s: field %d says its bounds [%v, %v] are tight, the values span [%v, %v]", te.FilePath, f.ID, st.LowerBound, st.UpperBound, lo, hi)
			}
			if !f.Stored() {
				continue
			}
			if st.ValueCount != nil && *st.ValueCount != int64(len(rows)) {
				t.Fatalf("%s: field %d value count %d, the file holds %d", te.FilePath, f.ID, *st.ValueCount, len(rows))
			}
			if st.NullValueCount != nil && *st.NullValueCount != nulls {
				t.Fatalf("%s: field %d null count %d, the file holds %d nulls", te.FilePath, f.ID, *st.NullValueCount, nulls)
			}
			if st.NanValueCount != nil && *st.NanValueCount != nans {
				t.Fatalf("%s: field %d NaN count %d, the file holds %d NaNs", te.FilePath, f.ID, *st.NanValueCount, nans)
			}
		}
	}
}

func isNaN(v any) bool {
	switch f := v.(type) {
	case float64:
		return math.IsNaN(f)
	case float32:
		return math.IsNaN(float64(f))
	}
	return false
}
