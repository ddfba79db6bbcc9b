package tablescan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table/dv"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestLiveRowsEqualsScans: for delete states of every kind (positions,
// equality sets on one and two fields, null keys, Within, none of them),
// each alone and several in one call, LiveRows gives the positions that a
// ScanFile under each state gives.
func TestLiveRowsEqualsScans(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 3, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	var rows [][]any
	for i := range int64(200) {
		var name any = fmt.Sprintf("n%d", rng.IntN(20))
		if rng.IntN(10) == 0 {
			name = nil
		}
		rows = append(rows, r(i, name, float64(i)))
	}
	rows = append(rows, special()...)
	tbl, files := testtables.Append(t, tbl, rows...)
	file := files[0]
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := tbl.Schema()

	positions := func(ps ...uint64) *dv.RoaringPositionBitmap {
		b := dv.NewRoaringPositionBitmap()
		for _, p := range ps {
			b.Set(p)
		}
		return b
	}
	byID := NewEqualityDeletes([]int{1})
	for _, id := range []int64{3, 4, 5, 50, 199, 102, 999} {
		if err := byID.Add(format.Key{id}); err != nil {
			t.Fatal(err)
		}
	}
	byName := NewEqualityDeletes([]int{2})
	for _, name := range []any{"n3", "n7", nil} {
		if err := byName.Add(format.Key{name}); err != nil {
			t.Fatal(err)
		}
	}
	byPair := NewEqualityDeletes([]int{1, 2})
	for i, row := range rows[:40] {
		if i%3 == 0 {
			if err := byPair.Add(format.Key{row[0], row[1]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	within := roaring64.New()
	for p := uint64(0); p < uint64(len(rows)); p += 7 {
		within.Add(p)
	}
	states := map[string]*FileDeletes{
		"nothing":                 {},
		"positions":               {Positions: positions(0, 1, 2, 60, 61, 203)},
		"by id":                   {Equality: []*EqualityDeletes{byID}},
		"by name and positions":   {Equality: []*EqualityDeletes{byName}, Positions: positions(10, 11, 12)},
		"by pair, id and name":    {Equality: []*EqualityDeletes{byPair, byID, byName}},
		"within and by name":      {Equality: []*EqualityDeletes{byName}, Within: within},
		"within and positions":    {Within: within, Positions: positions(0, 7, 14)},
		"by id, name, positions":  {Equality: []*EqualityDeletes{byID, byName}, Positions: positions(100, 150, 200)},
		"positions past the file": {Positions: positions(5000)},
	}
	scanned := func(fd *FileDeletes) *roaring64.Bitmap {
		out := roaring64.New()
		err := ScanFile(ctx, fs, schema, file, fd, Options{Columns: []int{1, format.FieldIDPos}, FormatVersion: 3, BatchRows: 16},
			func(rec arrow.RecordBatch) error {
				pos := rec.Column(1).(*array.Int64)
				for i := range pos.Len() {
					out.Add(uint64(pos.Value(i)))
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var names []string
	var all []*FileDeletes
	for name, fd := range states {
		got, err := LiveRows(ctx, fs, schema, file, []*FileDeletes{fd}, Options{FormatVersion: 3, BatchRows: 16})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := scanned(fd); !got[0].Equals(want) {
			t.Errorf("%s: LiveRows %d positions %v, scan %d positions %v", name, got[0].GetCardinality(), got[0].ToArray(), want.GetCardinality(), want.ToArray())
		}
		names, all = append(names, name), append(all, fd)
	}
	got, err := LiveRows(ctx, fs, schema, file, all, Options{FormatVersion: 3, BatchRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i, fd := range all {
		if want := scanned(fd); !got[i].Equals(want) {
			t.Errorf("%s, among all: LiveRows %d positions, scan %d", names[i], got[i].GetCardinality(), want.GetCardinality())
		}
	}
}
