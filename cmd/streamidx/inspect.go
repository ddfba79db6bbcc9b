package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
)

func init() {
	register(command{name: "inspect", summary: "show an index: definition, snapshots, range files and bounds", run: runInspect})
}

// inspectOutput is the stable JSON of `inspect --json`, documented in
// README.md. Values of index fields are strings in FormatValue's rendering,
// or null.
type inspectOutput struct {
	Table            string                    `json:"table"`
	Index            string                    `json:"index"`
	MetadataLocation string                    `json:"metadata_location"`
	IndexUUID        string                    `json:"index_uuid"`
	TableUUID        string                    `json:"table_uuid"`
	Type             string                    `json:"type"`
	Location         string                    `json:"location"`
	Supported        bool                      `json:"supported"`
	Fields           []inspectField            `json:"fields"`
	Properties       map[string]string         `json:"properties"`
	Snapshots        []inspectSnapshot         `json:"snapshots"`
	CurrentSnapshot  *int64                    `json:"current_snapshot_id"`
	Tracking         *inspectTracking          `json:"tracking"`
	MetadataLog      []format.MetadataLogEntry `json:"metadata_log"`
}

type inspectField struct {
	ID              int    `json:"id"`
	Name            string `json:"name"`
	Kind            string `json:"kind"`
	Type            string `json:"type"`
	Expr            string `json:"expr,omitempty"`
	ClusterPosition int    `json:"cluster_position,omitempty"` // 1-based; 0 when not clustered
}

type inspectSnapshot struct {
	SnapshotID            int64             `json:"snapshot_id"`
	SourceTableSnapshotID int64             `json:"source_table_snapshot_id"`
	TimestampMs           int64             `json:"timestamp_ms"`
	TrackingFile          string            `json:"tracking_file"`
	Properties            map[string]string `json:"properties,omitempty"`
}

type inspectTracking struct {
	SnapshotID   int64              `json:"snapshot_id"`
	TrackingFile string             `json:"tracking_file"`
	RangeFiles   []inspectRangeFile `json:"range_files"`
	Records      int64              `json:"records"`
	Bytes        int64              `json:"bytes"`
}

type inspectRangeFile struct {
	FilePath        string                   `json:"file_path"`
	FileFormat      string                   `json:"file_format"`
	RecordCount     int64                    `json:"record_count"`
	FileSizeInBytes int64                    `json:"file_size_in_bytes"`
	GroupMax        []*string                `json:"group_max"`
	Bounds          map[string]inspectBounds `json:"bounds"` // by field ID
}

type inspectBounds struct {
	Lower *string `json:"lower"`
	Upper *string `json:"upper"`
}

func runInspect(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "source table snapshot `id` (or index snapshot id) whose range files to show (default: current)")
	asJSON := fs.Bool("json", false, "print JSON (stable; see README)")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	t, err := f.open(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer t.Close()
	tbl, md, unsupported := t.tbl, t.md, t.unsupported != nil
	out := inspectOutput{
		Table: f.table, Index: f.index, MetadataLocation: t.metaLoc, IndexUUID: md.IndexUUID,
		TableUUID: md.TableUUID, Type: strings.ToUpper(md.Type), Location: md.Location, Supported: !unsupported,
		Properties: md.Properties, MetadataLog: md.MetadataLog,
	}
	for _, s := range md.Snapshots {
		out.Snapshots = append(out.Snapshots, inspectSnapshot{s.SnapshotID, s.SourceTableSnapshotID, s.TimestampMs, s.TrackingFile, s.Properties})
	}
	if unsupported {
		return exitOK, printInspect(stdout, out, *asJSON)
	}
	snap := md.CurrentSnapshot()
	if f.snapshot != 0 {
		if snap, err = findIndexSnapshot(md, f.snapshot); err != nil {
			return exitError, fmt.Errorf("index %s: %w", f.index, err)
		}
	}
	var sourceSnap *table.Snapshot
	if snap != nil {
		out.CurrentSnapshot = &md.CurrentSnapshot().SnapshotID
		sourceSnap = tbl.SnapshotByID(snap.SourceTableSnapshotID)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, sourceSnap))
	if err != nil {
		return exitError, err
	}
	schema := lineage.SnapshotSchema(tbl, sourceSnap)
	columnName := func(id int) string {
		if n, _, ok := format.MetadataColumn(id); ok {
			return n
		}
		n, _ := schema.FindColumnName(id)
		return n
	}
	for _, f := range is.Fields() {
		f2 := inspectField{ID: f.ID, Name: f.Name, Kind: f.Kind.String(), Type: f.Type.String()}
		if f.Expr != nil {
			f2.Expr = format.Describe(f.Expr, columnName)
		}
		f2.ClusterPosition = slices.Index(md.ClusterSpec, f.ID) + 1
		out.Fields = append(out.Fields, f2)
	}
	if snap != nil {
		tf, _, err := t.store.ReadTracking(ctx, t.md, snap, is)
		if err != nil {
			return exitError, err
		}
		entries := tf.Entries
		out.Tracking = &inspectTracking{SnapshotID: snap.SnapshotID, TrackingFile: snap.TrackingFile}
		for _, te := range entries {
			rf := inspectRangeFile{FilePath: te.FilePath, FileFormat: te.FileFormat, RecordCount: te.RecordCount,
				FileSizeInBytes: te.FileSizeInBytes, Bounds: map[string]inspectBounds{}}
			for _, f := range is.ClusterFields() {
				if st := te.Stats[f.ID]; st != nil && st.HasGroupMax {
					rf.GroupMax = append(rf.GroupMax, valueString(f, st.GroupMax))
				}
			}
			for _, f := range is.Fields() {
				if st := te.Stats[f.ID]; st != nil && (st.LowerBound != nil || st.UpperBound != nil) {
					rf.Bounds[fmt.Sprint(f.ID)] = inspectBounds{valueString(f, st.LowerBound), valueString(f, st.UpperBound)}
				}
			}
			out.Tracking.RangeFiles = append(out.Tracking.RangeFiles, rf)
			out.Tracking.Records += te.RecordCount
			out.Tracking.Bytes += te.FileSizeInBytes
		}
	}
	return exitOK, printInspect(stdout, out, *asJSON)
}

func valueString(f format.IndexField, v any) *string {
	if v == nil {
		return nil
	}
	s := format.FormatValue(f.Type, v)
	return &s
}

func printInspect(w io.Writer, out inspectOutput, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "index %s on %s (%s)\n", out.Index, out.Table, out.Type)
	fmt.Fprintf(w, "metadata: %s\nlocation: %s\nindex-uuid: %s\n", out.MetadataLocation, out.Location, out.IndexUUID)
	if !out.Supported {
		fmt.Fprintf(w, "\nstreamidx does not implement index type %s: readers ignore this index.\n", out.Type)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(out.Fields) > 0 {
		fmt.Fprintln(w, "\nfields:")
		fmt.Fprintln(tw, "  ID\tNAME\tKIND\tTYPE\tCLUSTER\tEXPRESSION")
		for _, f := range out.Fields {
			cl := "-"
			if f.ClusterPosition > 0 {
				cl = fmt.Sprint(f.ClusterPosition)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", f.ID, f.Name, f.Kind, f.Type, cl, f.Expr)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nsnapshots (%d):\n", len(out.Snapshots))
	fmt.Fprintln(tw, "  SNAPSHOT\tSOURCE SNAPSHOT\tCREATED\tRANGE FILES\tRECORDS")
	for _, s := range out.Snapshots {
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\n", s.SnapshotID, s.SourceTableSnapshotID,
			time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339), orDash(s.Properties["streamidx.range-files"]), orDash(s.Properties["streamidx.records"]))
	}
	tw.Flush()
	if t := out.Tracking; t != nil {
		fmt.Fprintf(w, "\nrange files of snapshot %d (%d records, %s):\ntracking file: %s\n", t.SnapshotID, t.Records, humanBytes(t.Bytes), t.TrackingFile)
		fmt.Fprintln(tw, "  #\tRECORDS\tSIZE\tGROUP MAX\tFILE")
		for i, rf := range t.RangeFiles {
			var gm []string
			for _, v := range rf.GroupMax {
				if v == nil {
					gm = append(gm, "null")
				} else {
					gm = append(gm, *v)
				}
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\t(%s)\t%s\n", i, rf.RecordCount, humanBytes(rf.FileSizeInBytes), strings.Join(gm, ", "), rf.FilePath)
		}
		tw.Flush()
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
