package main

import (
	"context"
	"errors"
	"flag"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
)

// indexFlags are the --table, --index and (optional) --snapshot flags that
// build, verify, inspect and lookup share.
type indexFlags struct {
	table    string
	index    string
	snapshot int64
}

// addIndexFlags registers --table and --index, and --snapshot with the
// given help when it is not empty.
func addIndexFlags(fs *flag.FlagSet, snapshotHelp string) *indexFlags {
	f := addTableFlags(fs, snapshotHelp)
	fs.StringVar(&f.index, "index", "", "index `name`")
	return f
}

// addTableFlags registers --table, and --snapshot with the given help when
// it is not empty, for the commands that name a table and no index.
func addTableFlags(fs *flag.FlagSet, snapshotHelp string) *indexFlags {
	f := &indexFlags{}
	fs.StringVar(&f.table, "table", "", "source table `NS.TABLE`")
	if snapshotHelp != "" {
		fs.Int64Var(&f.snapshot, "snapshot", 0, snapshotHelp)
	}
	return f
}

// parseTable parses the command line and checks that --table and the flags
// named in required are given.
func (f *indexFlags) parseTable(fs *flag.FlagSet, args []string, required ...string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return requireFlags(fs, append([]string{"table"}, required...)...)
}

// indexTarget is what the shared preamble opened: the environment, the
// table and the index.
type indexTarget struct {
	*env
	tbl     *table.Table
	id      table.Identifier
	md      *format.Metadata
	metaLoc string
	// unsupported holds the error of an index of a type streamidx does not
	// implement, whose metadata is still there to name it.
	unsupported error
}

// parse parses the command line and checks that --table, --index and the
// flags named in required are given.
func (f *indexFlags) parse(fs *flag.FlagSet, args []string, required ...string) error {
	return f.parseTable(fs, args, append([]string{"index"}, required...)...)
}

// open opens the environment and loads the table and the index. An index
// of a type streamidx does not implement is not an error here:
// indexTarget.unsupported says so, and each command decides. The caller
// closes the target.
func (f *indexFlags) open(ctx context.Context, g *globals) (*indexTarget, error) {
	e, err := openEnv(ctx, g)
	if err != nil {
		return nil, err
	}
	t := &indexTarget{env: e}
	t.tbl, t.id, t.md, t.metaLoc, err = e.loadIndex(ctx, f.table, f.index)
	if errors.Is(err, format.ErrUnsupportedIndexType) {
		t.unsupported, err = err, nil
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return t, nil
}

// openCatalogs opens the environment and names the table of --table, for
// the commands that work on an index's catalog entry and files without
// loading the index through the preamble (drop, expire, rollback: the
// index may be broken, or its table re-created). The caller closes the
// environment.
func (f *indexFlags) openCatalogs(ctx context.Context, g *globals) (*env, table.Identifier, error) {
	id, err := config.ParseTable(f.table)
	if err != nil {
		return nil, nil, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	return e, id, nil
}
