package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/streamidx/streamidx/internal/buildinfo"
)

func init() {
	register(command{name: "version", summary: "print the version, the commit it was built from and the versions of its main libraries", run: runVersion})
}

func runVersion(_ context.Context, _ *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fmt.Fprintln(stdout, buildinfo.String("streamidx"))
	return exitOK, nil
}
