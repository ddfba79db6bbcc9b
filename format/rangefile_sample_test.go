package format

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/google/uuid"
)

// rfUpdate is the package's -update flag: tests with golden files rewrite
// them instead of comparing.
var rfUpdate = flag.Bool("update", false, "rewrite golden files under testdata")

var rfSamplePath = filepath.Join("testdata", "rangefile_sample.parquet")

// rfSampleRows are the entries of the golden range file, in clustering
// order: nulls first in every key field, -0.0 before 0.0, NaN last.
func rfSampleRows() []rfRow {
	keys := [][3]any{
		{nil, 1.5, int32(19000)},
		{int32(0), math.Copysign(0, -1), int32(19001)},
		{int32(0), 0.0, nil},
		{int32(3), math.Inf(1), int32(19002)},
		{int32(3), math.NaN(), int32(19002)},
		{int32(7), nil, int32(19003)},
	}
	strs := []string{"", "alpha", "é", "zeta", "\U0001F600", "zz"}
	rows := make([]rfRow, len(keys))
	for i, k := range keys {
		d38 := decimal128.FromI64(int64(i))
		switch i {
		case 0:
			d38 = decimal128.GetMaxValue(38).Negate()
		case 5:
			d38 = decimal128.GetMaxValue(38)
		}
		rows[i] = rfRow{
			1:          i%2 == 0,
			2:          int32(i*1000 - 2500),
			3:          int64(i) << 40,
			4:          float32(i) * 1.5,
			5:          k[1],
			6:          decimal128.FromI64(int64(i*12345 - 30000)),
			7:          decimal128.FromI64(int64(i) * 1_000_000_000_000),
			8:          d38,
			9:          int32(19000 + i),
			10:         int64(i) * 3_600_000_000,
			11:         1_700_000_000_000_000 + int64(i),
			12:         1_700_000_000_000_000 + int64(i)*1_000_000,
			13:         1_700_000_000_000_000_000 + int64(i),
			14:         1_700_000_000_000_000_000 + int64(i)*1_000_000_000,
			15:         strs[i],
			16:         uuid.UUID{byte(i), 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7},
			17:         []byte{byte(i), 1, 2, 3, 4},
			18:         bytes.Repeat([]byte{byte(i)}, i),
			rfFileID:   fmt.Sprintf("s3://warehouse/db/t/data/%05d.parquet", i/3),
			rfPosID:    int64(i % 3),
			rfBucketID: k[0],
			rfDayID:    k[2],
		}
		// One null among the identity fields of each row.
		if n := i*5%18 + 1; n != 5 {
			rows[i][n] = nil
		}
	}
	return rows
}

func rfWriteSample(t *testing.T) []byte {
	t.Helper()
	s := rfAllTypesIndex(t)
	data, _ := rfWrite(t, memory.NewGoAllocator(), s, rfSampleRows(), RangeFileOptions{RowGroupRows: 4})
	return data
}

// TestWriteSampleRangeFile rewrites the golden range file under -update.
// Otherwise it checks that the writer still lays files out as the golden
// one: the same Parquet schema and row groups.
func TestWriteSampleRangeFile(t *testing.T) {
	data := rfWriteSample(t)
	if *rfUpdate {
		if err := os.WriteFile(rfSamplePath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	golden, err := os.ReadFile(rfSamplePath)
	if err != nil {
		t.Fatal(err)
	}
	layout := func(data []byte) string {
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		out := pf.MetaData().Schema.String()
		for g := range pf.NumRowGroups() {
			out += fmt.Sprintf("row group %d: %d rows\n", g, pf.MetaData().RowGroup(g).NumRows())
		}
		return out
	}
	if got, want := layout(data), layout(golden); got != want {
		t.Errorf("the writer's layout changed; if that is intended, run with -update.\ngot:\n%s\ngolden:\n%s", got, want)
	}
}

// TestRangeFileSampleDecodes reads the golden range file: a format change
// that cannot read files already written fails here.
func TestRangeFileSampleDecodes(t *testing.T) {
	golden, err := os.ReadFile(rfSamplePath)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	r := rfOpen(t, mem, golden, s)
	want := rfSampleRows()
	rfCheckRows(t, s, rfStoredIDs(s), rfReadRows(t, r, s, nil, nil), want)
	if r.NumRowGroups() != 2 {
		t.Fatalf("NumRowGroups = %d, want 2", r.NumRowGroups())
	}
	_, stats := r.RowGroupStats(0)
	if b := stats[rfBucketID]; b.LowerBound != int32(0) || b.UpperBound != int32(3) || *b.NullValueCount != 1 {
		t.Errorf("row group 0 bucket: %v..%v with %d nulls, want 0..3 with 1", b.LowerBound, b.UpperBound, *b.NullValueCount)
	}
}
