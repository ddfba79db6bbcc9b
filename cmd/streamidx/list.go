package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
)

func init() {
	register(command{name: "list", summary: "list the indexes of a table", run: runList})
}

func runList(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "source table `NS.TABLE`")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if err := requireFlags(fs, "table"); err != nil {
		return exitError, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	id, err := config.ParseTable(*tableName)
	if err != nil {
		return exitError, err
	}
	names, err := e.indexes.List(ctx, id)
	if err != nil {
		return exitError, err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tTYPE\tSNAPSHOTS\tSOURCE SNAPSHOT\tMETADATA")
	for _, n := range names {
		md, loc, err := e.indexes.Load(ctx, id, n)
		if err != nil && !errors.Is(err, format.ErrUnsupportedIndexType) {
			return exitError, err
		}
		source := "-"
		if s := md.CurrentSnapshot(); s != nil {
			source = fmt.Sprint(s.SourceTableSnapshotID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", n, md.Type, len(md.Snapshots), source, loc)
	}
	return exitOK, tw.Flush()
}
