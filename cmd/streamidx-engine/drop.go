package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

func init() {
	register(command{name: "drop", summary: "remove an index from the index catalog (its data files stay)", run: runDrop})
}

// runDrop removes an index's catalog entry. It does not need the table: an
// index whose table was dropped and re-created is dropped this way before
// it is created again.
func runDrop(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	e, id, err := f.openCatalogs(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	if err := e.indexes.Drop(ctx, id, f.index); err != nil {
		return exitError, err
	}
	fmt.Fprintf(stdout, "dropped index %s of %s\n", f.index, f.table)
	return exitOK, nil
}
