package rewrite

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
)

// written is what writeDeletes put in storage.
type written struct {
	files []iceberg.DataFile // manifest entries of the new delete files
	paths []string           // their locations, each once
	bytes int64
}

// writeDeletes writes the new position deletes of the plan's targets: one
// Puffin file holding a deletion vector per data file on v3 tables, one
// Parquet position delete file per partition on v2 tables.
func (p *plan) writeDeletes(ctx context.Context) (*written, error) {
	wfs, ok := p.fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("table io %T cannot write files", p.fs)
	}
	lp, err := p.tbl.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("location provider: %w", err)
	}
	targets := p.written()
	out := &written{}
	if len(targets) == 0 {
		return out, nil
	}
	if p.tbl.Metadata().Version() >= 3 {
		meta := p.tbl.Metadata()
		w := dv.NewDVWriter(wfs, func(id int32) *iceberg.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
		for _, t := range targets {
			bm, err := tablescan.ToDV(t.deleted)
			if err != nil {
				return nil, err
			}
			w.Load(t.file.FilePath(), bm, t.file.SpecID(), t.file.Partition())
		}
		loc := lp.NewDataLocation("streamidx-dv-" + uuid.NewString() + ".puffin")
		files, err := w.Flush(ctx, loc)
		if err != nil {
			return nil, fmt.Errorf("write deletion vectors: %w", err)
		}
		out.files, out.paths = files, []string{loc}
		if len(files) > 0 {
			out.bytes = files[0].FileSizeBytes()
		}
		return out, nil
	}
	// v2: one file per partition, rows sorted by file and position (the
	// spec's order for position delete files).
	var groups [][]*target
	byPartition := map[string]int{}
	for _, t := range targets {
		k := fmt.Sprintf("%d/%#v", t.file.SpecID(), t.file.Partition())
		i, ok := byPartition[k]
		if !ok {
			i = len(groups)
			byPartition[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], t)
	}
	for _, g := range groups {
		loc := lp.NewDataLocation("streamidx-pos-deletes-" + uuid.NewString() + ".parquet")
		df, size, err := writePositionDeleteFile(wfs, p.tbl.Metadata().PartitionSpecByID(int(g[0].file.SpecID())), loc, g)
		if err != nil {
			out.remove(wfs)
			return nil, err
		}
		out.files = append(out.files, df)
		out.paths = append(out.paths, loc)
		out.bytes += size
	}
	return out, nil
}

// remove deletes the written files, after a commit that did not happen.
func (w *written) remove(fs iceio.IO) {
	for _, p := range w.paths {
		_ = fs.Remove(p)
	}
}

var positionDeleteSchema = arrow.NewSchema([]arrow.Field{
	{Name: "file_path", Type: arrow.BinaryTypes.String,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(format.FieldIDDeleteFilePath)})},
	{Name: "pos", Type: arrow.PrimitiveTypes.Int64,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(format.FieldIDDeletePos)})},
}, nil)

// writePositionDeleteFile writes the positions of targets (sorted by
// location, all of one partition) as a Parquet position delete file.
func writePositionDeleteFile(fs iceio.WriteFileIO, spec *iceberg.PartitionSpec, loc string, targets []*target) (iceberg.DataFile, int64, error) {
	if spec == nil {
		return nil, 0, fmt.Errorf("position delete file %s: unknown partition spec %d", loc, targets[0].file.SpecID())
	}
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(positionDeleteSchema, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, 0, fmt.Errorf("position delete file %s: %w", loc, err)
	}
	const batch = 64 * 1024
	paths := array.NewStringBuilder(memory.DefaultAllocator)
	defer paths.Release()
	positions := array.NewInt64Builder(memory.DefaultAllocator)
	defer positions.Release()
	var rows int64
	flush := func() error {
		if paths.Len() == 0 {
			return nil
		}
		pa, po := paths.NewArray(), positions.NewArray()
		rec := array.NewRecordBatch(positionDeleteSchema, []arrow.Array{pa, po}, int64(pa.Len()))
		pa.Release()
		po.Release()
		defer rec.Release()
		return w.WriteBuffered(rec)
	}
	for _, t := range targets {
		it := t.deleted.Iterator()
		for it.HasNext() {
			paths.Append(t.file.FilePath())
			positions.Append(int64(it.Next()))
			rows++
			if paths.Len() == batch {
				if err := flush(); err != nil {
					return nil, 0, fmt.Errorf("position delete file %s: %w", loc, err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, 0, fmt.Errorf("position delete file %s: %w", loc, err)
	}
	if err := w.Close(); err != nil {
		return nil, 0, fmt.Errorf("position delete file %s: %w", loc, err)
	}
	if err := fs.WriteFile(loc, buf.Bytes()); err != nil {
		return nil, 0, fmt.Errorf("write position delete file %s: %w", loc, err)
	}
	size := int64(buf.Len())
	first, last := targets[0].file.FilePath(), targets[len(targets)-1].file.FilePath()
	b, err := iceberg.NewDataFileBuilder(*spec, iceberg.EntryContentPosDeletes, loc, iceberg.ParquetFile,
		targets[0].file.Partition(), nil, nil, rows, size)
	if err != nil {
		return nil, 0, fmt.Errorf("position delete file %s: %w", loc, err)
	}
	// Bounds on file_path let readers skip the file for other data files.
	b.LowerBoundValues(map[int][]byte{format.FieldIDDeleteFilePath: []byte(first)}).
		UpperBoundValues(map[int][]byte{format.FieldIDDeleteFilePath: []byte(last)})
	if strings.Compare(first, last) == 0 {
		b.ReferencedDataFile(first)
	}
	return b.Build(), size, nil
}
