// Command streamidx is the streamidx command line. It answers one command
// itself and hands every other to streamidx-engine, installed beside it:
//
//   - `streamidx lookup` through an index snapshot built for the table
//     snapshot it asks for (the common case: an index the daemon keeps
//     fresh) is answered here, from the table's metadata file, the index
//     catalog and the range files. This program does not link iceberg-go's
//     table package, whose initialisation alone takes about 80 ms, so a
//     whole lookup process takes a few milliseconds.
//   - Everything else (the other commands, -h, a lookup through an index
//     that lags the table, a REST catalog, an index type streamidx does not
//     implement, and any lookup that fails here) runs in streamidx-engine:
//     this process turns into it (exec: same process ID, arguments,
//     environment and standard input), and it answers, prints and exits as
//     `streamidx` always has.
//
// Both print a lookup's rows alike (TestFastLookupPrintsAsTheEngine).
package main

import (
	"fmt"
	"os"
)

func main() {
	args := os.Args[1:]
	q, ok := parseLookup(args)
	if ok && !measuring() {
		code, handled := q.answer(os.Stdout, os.Stderr)
		if handled {
			os.Exit(code)
		}
	}
	if err := runEngine(args, q.stdin); err != nil {
		fmt.Fprintf(os.Stderr, "streamidx: %v\n", err)
		os.Exit(2)
	}
}

// measuring reports whether the environment asks for a profile, a trace
// or the peak memory of the command, which streamidx-engine writes.
func measuring() bool {
	for _, env := range []string{"STREAMIDX_CPUPROFILE", "STREAMIDX_TRACE", "STREAMIDX_MEMPROFILE", "STREAMIDX_PEAK_RSS_FILE"} {
		if os.Getenv(env) != "" {
			return true
		}
	}
	return false
}
