package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/streamidx/streamidx/internal/indexdef"
)

func init() {
	register(command{name: "create", summary: "define an index from a YAML/JSON definition", run: runCreate})
}

func runCreate(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "source table `NS.TABLE`")
	defPath := fs.String("def", "", "index definition `file` (YAML or JSON)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if err := requireFlags(fs, "table", "def"); err != nil {
		return exitError, err
	}
	data, err := os.ReadFile(*defPath)
	if err != nil {
		return exitError, fmt.Errorf("read definition: %w", err)
	}
	def, err := indexdef.Parse(data)
	if err != nil {
		return exitError, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	tbl, id, err := e.loadTable(ctx, *tableName)
	if err != nil {
		return exitError, err
	}
	loc, err := e.indexLocation(tbl, id, def.Name)
	if err != nil {
		return exitError, err
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), loc)
	if err != nil {
		return exitError, err
	}
	metaLoc, err := e.indexes.Create(ctx, id, def.Name, md)
	if err != nil {
		return exitError, fmt.Errorf("register index %s: %w", def.Name, err)
	}
	e.log.Info("index created", "table", *tableName, "index", def.Name, "metadata", metaLoc)
	fmt.Fprintf(stdout, "created index %s on %s\nmetadata: %s\n", def.Name, *tableName, metaLoc)
	return exitOK, nil
}
