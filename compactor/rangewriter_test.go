package compactor

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

func testIndexSchema(t *testing.T) *format.IndexSchema {
	t.Helper()
	source := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String},
	)
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1, 2}, ClusterSpec: []int{1}}
	return validIndexSchema(t, md, source)
}

func readRangeFile(t *testing.T, is *format.IndexSchema, te format.TrackingEntry) []format.Key {
	t.Helper()
	r, err := objstore.Local().OpenRange(context.Background(), &te, is, format.RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []format.Key
	err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, format.Key{format.ValueAt(rec.Column(0), i), string([]byte(format.ValueAt(rec.Column(1), i).(string)))})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRangeWriterSplitsOnlyAtKeyChanges(t *testing.T) {
	is := testIndexSchema(t)
	dir := t.TempDir()
	w, err := NewRangeWriter(context.Background(), is, "file://"+filepath.ToSlash(dir), RangeWriterOptions{
		TargetFileSize: 4 << 10, RowGroupRows: 256, BatchRows: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	for i := range n {
		// keys repeat in runs of 37 entries, longer than a batch is never needed
		if err := w.Add(format.Key{int64(i / 37), "payload-" + string(rune('a'+i%26))}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 {
		t.Fatalf("a 4 KiB target over %d entries should give several files, got %d", n, len(entries))
	}
	var total int64
	var prevLast any
	for i, e := range entries {
		rows := readRangeFile(t, is, e)
		if int64(len(rows)) != e.RecordCount {
			t.Errorf("file %d: %d rows, tracking says %d", i, len(rows), e.RecordCount)
		}
		total += e.RecordCount
		first, last := rows[0][0].(int64), rows[len(rows)-1][0].(int64)
		if prevLast != nil && first <= prevLast.(int64) {
			t.Errorf("file %d starts at key %d, previous file ended at %d: a key is split across files", i, first, prevLast)
		}
		if gm := e.Stats[1].GroupMax; gm != last {
			t.Errorf("file %d group max %v, last key %d", i, gm, last)
		}
		prevLast = last
		if i < len(entries)-1 && e.FileSizeInBytes > 64<<10 {
			t.Errorf("file %d is %d bytes, far past the 4 KiB target", i, e.FileSizeInBytes)
		}
	}
	if total != n {
		t.Errorf("%d entries written, %d added", total, n)
	}
}

// TestRangeWriterSplitsDoNotDependOnWriteSpeed: batches are written on a
// goroutine of their own, and where files split is the same whether the
// writes are instant or slow, by entries given one by one and as slices.
func TestRangeWriterSplitsDoNotDependOnWriteSpeed(t *testing.T) {
	is := testIndexSchema(t)
	layout := func(delay time.Duration) []int64 {
		w, err := NewRangeWriter(context.Background(), is, "file://"+filepath.ToSlash(t.TempDir()), RangeWriterOptions{
			TargetFileSize: 4 << 10, RowGroupRows: 100, PageSizeBytes: 512, BatchRows: 100, // every write compresses its pages
		})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		w.beforeWrite = func() {
			n++
			if n%3 != 0 { // some writes slow, some not
				time.Sleep(delay)
			}
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, w.arrowSchema)
		defer b.Release()
		for i := range 12000 {
			// Payloads lengthen as keys ascend, so that the bytes per entry
			// a split is decided on depend on which writes were counted.
			key, payload := int64(i/5), fmt.Sprintf("%0*d", 1+i/150, i)
			if i < 6000 {
				if err := w.Add(format.Key{key, payload}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			b.Field(0).(*array.Int64Builder).Append(key)
			b.Field(1).(*array.StringBuilder).Append(payload)
			if b.Field(0).Len() == 700 {
				rec := b.NewRecordBatch()
				err := w.AddRows(rec, 0, int(rec.NumRows()))
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		entries, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		var counts []int64
		for _, e := range entries {
			counts = append(counts, e.RecordCount)
		}
		return counts
	}
	fast, slow := layout(0), layout(3*time.Millisecond)
	if len(fast) < 3 {
		t.Fatalf("%d files; the test needs several", len(fast))
	}
	if !slices.Equal(fast, slow) {
		t.Errorf("files of %v entries with instant writes, %v with slow ones", fast, slow)
	}
}

func TestRangeWriterRefusesDisorder(t *testing.T) {
	is := testIndexSchema(t)
	w, err := NewRangeWriter(context.Background(), is, "file://"+filepath.ToSlash(t.TempDir()), RangeWriterOptions{BatchRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	_ = w.Add(format.Key{int64(5), "a"})
	_ = w.Add(format.Key{int64(6), "a"})
	_ = w.Add(format.Key{int64(4), "a"})
	err = w.Add(format.Key{int64(7), "a"})
	if err == nil {
		_, err = w.Close()
	}
	if err == nil {
		t.Fatal("entries out of cluster order were accepted")
	}
}

// TestRangeWriterGathersSlicesInOrder feeds the writer as a merge of
// uniformly spread changes does: slices of a few rows of a batch (AddRows)
// between single entries (Add). The files hold every entry once, in order,
// and split only where the key changes, although the writer gathers what it
// is given before the Parquet writer sees it.
func TestRangeWriterGathersSlicesInOrder(t *testing.T) {
	is := testIndexSchema(t)
	as, err := format.ArrowSchema(is.EntrySchema())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	const n = 3000
	for i := range n {
		// Even keys come from the batch, in runs of two entries per key.
		for j, v := range []any{int64(2 * (i / 2)), fmt.Sprintf("old-%05d", i)} {
			if err := format.AppendValue(b.Field(j), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	w, err := NewRangeWriter(context.Background(), is, "file://"+filepath.ToSlash(t.TempDir()), RangeWriterOptions{
		TargetFileSize: 2 << 10, RowGroupRows: 512, BatchRows: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []format.Key
	for from, step := 0, 1; from < n; step = step%5 + 1 {
		to := min(from+step, n)
		if to%2 == 1 && to < n {
			to++ // a key's two entries travel together
		}
		if err := w.AddRows(rec, from, to); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			want = append(want, format.Key{int64(2 * (i / 2)), fmt.Sprintf("old-%05d", i)})
		}
		// An inserted entry of the odd key after the last one passed on.
		k := int64(2*((to-1)/2) + 1)
		e := format.Key{k, fmt.Sprintf("new-%05d", k)}
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
		from = to
	}
	entries, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 {
		t.Fatalf("a 2 KiB target over %d entries should give several files, got %d", len(want), len(entries))
	}
	var got []format.Key
	var prevLast int64 = -1
	for i, e := range entries {
		rows := readRangeFile(t, is, e)
		if first := rows[0][0].(int64); first <= prevLast {
			t.Errorf("file %d starts at key %d, previous file ended at %d: a key is split across files", i, first, prevLast)
		}
		prevLast = rows[len(rows)-1][0].(int64)
		got = append(got, rows...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries written, %d given", len(got), len(want))
	}
	for i := range want {
		if got[i][0] != want[i][0] || got[i][1] != want[i][1] {
			t.Fatalf("entry %d is %v, want %v", i, got[i], want[i])
		}
	}
}

// dictionaryBatch is n entries of keys from first, with payloads given as a
// dictionary of strings, as a merge reads them from a range file.
func dictionaryBatch(t *testing.T, first int64, n int, payload func(i int) string) arrow.RecordBatch {
	t.Helper()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	keys := array.NewInt64Builder(memory.DefaultAllocator)
	defer keys.Release()
	dict := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	defer dict.Release()
	for i := range n {
		keys.Append(first + int64(i))
		if err := dict.AppendString(payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	k, d := keys.NewArray(), dict.NewArray()
	defer k.Release()
	defer d.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "payload", Type: dt}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{k, d}, int64(n))
}

// A writer that opens after another closed decodes into the buffers the
// first kept, and neither file takes values of the other's.
func TestRangeWritersHandDecodeBuffersOn(t *testing.T) {
	is := testIndexSchema(t)
	dir := "file://" + filepath.ToSlash(t.TempDir())
	const n = 2000
	write := func(first int64, payload func(i int) string) (*RangeWriter, []format.TrackingEntry) {
		w, err := NewRangeWriter(context.Background(), is, dir, RangeWriterOptions{RowGroupRows: 512, BatchRows: 300})
		if err != nil {
			t.Fatal(err)
		}
		rec := dictionaryBatch(t, first, n, payload)
		defer rec.Release()
		for from := 0; from < n; from += 70 {
			if err := w.AddRows(rec, from, min(from+70, n)); err != nil {
				t.Fatal(err)
			}
		}
		entries, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		return w, entries
	}
	long := func(i int) string { return fmt.Sprintf("s3://warehouse/db/t/data/%06d-long-file-name.parquet", i%37) }
	short := func(i int) string { return fmt.Sprintf("f%d", i%5) }
	_, first := write(0, long)
	spareDense.mu.Lock()
	kept := spareDense.bytes
	spareDense.mu.Unlock()
	if batch := 300 * len(long(0)); kept < batch {
		t.Fatalf("a closed writer left %d bytes of decode buffers, want at least the %d of a batch of joined payloads", kept, batch)
	}
	w2, err := NewRangeWriter(context.Background(), is, dir, RangeWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reused := denseCapacity(w2.dense[0]) + denseCapacity(w2.dense[1])
	w2.Abort()
	if reused == 0 {
		t.Fatal("the next writer opened with empty decode buffers: the closed writer's were not handed on")
	}
	_, second := write(n, short)
	for f, c := range []struct {
		entries []format.TrackingEntry
		first   int64
		payload func(int) string
	}{{first, 0, long}, {second, n, short}} {
		var got []format.Key
		for _, e := range c.entries {
			got = append(got, readRangeFile(t, is, e)...)
		}
		if len(got) != n {
			t.Fatalf("writer %d: %d entries read back, want %d", f+1, len(got), n)
		}
		for i, k := range got {
			if want := (format.Key{c.first + int64(i), c.payload(i)}); k[0] != want[0] || k[1] != want[1] {
				t.Fatalf("writer %d: entry %d is %v, want %v", f+1, i, k, want)
			}
		}
	}
}

// The last key the writer keeps (to split files only where the key
// changes) has strings of its own: a batch's string values share its
// buffers, which a build's pool hands to the next batch once the batch is
// written.
func TestRangeWriterKeepsTheLastKeyApartFromTheBatch(t *testing.T) {
	source := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String},
	)
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1, 2}, ClusterSpec: []int{2}}
	is := validIndexSchema(t, md, source)
	as, err := format.ArrowSchema(is.EntrySchema())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for i := range 10 {
		for j, v := range []any{int64(i), fmt.Sprintf("key-%02d", i)} {
			if err := format.AppendValue(b.Field(j), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w, err := NewRangeWriter(context.Background(), is, "file://"+filepath.ToSlash(t.TempDir()), RangeWriterOptions{BatchRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddRows(rec, 0, 10); err != nil {
		t.Fatal(err)
	}
	// The batch's buffer taken for other values, as a pool does.
	data := rec.Column(1).Data().Buffers()[2].Bytes()
	for i := range data {
		data[i] = 'z'
	}
	if got := w.lastKey[0]; got != "key-09" {
		t.Errorf("last key %q after the batch's buffer was reused, want %q", got, "key-09")
	}
}
