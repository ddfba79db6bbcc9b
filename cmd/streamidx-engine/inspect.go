package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamidx/streamidx/internal/indexinfo"
)

func init() {
	register(command{name: "inspect", summary: "show an index: definition, snapshots, range files and bounds", run: runInspect})
}

// inspectOutput is the stable JSON of `inspect --json`, documented in
// README.md.
type inspectOutput = indexinfo.Inspection

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
	out, err := indexinfo.Inspect(ctx, t.store, indexinfo.Target{TableName: f.table, IndexName: f.index, Table: t.tbl,
		Metadata: t.md, MetadataLocation: t.metaLoc, Unsupported: t.unsupported != nil}, f.snapshot)
	if err != nil {
		return exitError, err
	}
	return exitOK, printInspect(stdout, out, *asJSON)
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
