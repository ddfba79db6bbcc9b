package main

import (
	"flag"

	"github.com/streamidx/streamidx/internal/flagcheck"
)

// parseFlags parses a command's arguments and refuses stray words and a
// single-valued flag given twice (flagcheck.Check); the global flags may be
// given again, the last one winning, as before the command.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return flagcheck.Check(fs, args, flagcheck.Global...)
}
