package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexinfo"
)

func init() {
	register(command{name: "list", summary: "list the indexes of a table (exit 1 when one of them cannot be loaded)", run: runList})
}

// runList lists the indexes of a table. An index whose metadata cannot be
// loaded (a corrupt current metadata file, a newer format) is listed as
// BROKEN and does not hide the others; the reasons follow on stderr and
// the exit code is 1. A table that does not exist is an error (exit 2),
// also when indexes of that name are left in the index catalog.
func runList(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "source table `NS.TABLE`")
	if err := parseFlags(fs, args); err != nil {
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
	entries, broken, err := indexinfo.List(ctx, e.indexes, id)
	if err != nil {
		return exitError, err
	}
	tbl, _, err := e.loadTable(ctx, *tableName)
	if err != nil {
		if len(entries) > 0 {
			names := make([]string, len(entries))
			for i, en := range entries {
				names[i] = en.Index
			}
			err = fmt.Errorf("%w (the index catalog still names %d indexes of it: %s; streamidx drop removes them)",
				err, len(names), strings.Join(names, ", "))
		}
		return exitError, err
	}
	indexinfo.FillBehind(entries, tbl)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tTYPE\tSNAPSHOTS\tSOURCE SNAPSHOT\tBEHIND\tMETADATA")
	for _, en := range entries {
		if en.Broken != "" {
			fmt.Fprintf(tw, "%s\tBROKEN\t-\t-\t-\t%s\n", en.Index, orDashString(en.MetadataLocation))
			continue
		}
		source, behind := "-", "-"
		if en.SourceSnapshotID != nil {
			source = fmt.Sprint(*en.SourceSnapshotID)
		}
		if en.CommitsBehind != nil {
			behind = fmt.Sprint(*en.CommitsBehind)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", en.Index, en.Type, en.Snapshots, source, behind, en.MetadataLocation)
	}
	if err := tw.Flush(); err != nil {
		return exitError, err
	}
	if len(broken) > 0 {
		return exitDifferent, fmt.Errorf("%d of %d indexes cannot be loaded (streamidx rollback or drop repairs them):\n%w",
			len(broken), len(entries), errors.Join(broken...))
	}
	return exitOK, nil
}

func orDashString(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
