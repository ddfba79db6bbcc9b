// Command streamidx-engine runs the streamidx commands, which keep SCALAR
// indexes on Apache Iceberg tables fresh and use them. Users run it as
// `streamidx` (cmd/streamidx), which answers a lookup of a current index
// itself and turns into this program, under its own name, for everything
// else; run directly, it does the same. It is flag parsing and wiring only: each subcommand lives in its
// own file with its own flags, the work is done by the packages beside it
// (the daemon, the updater, the planner, verify). The global flags
// (--config, --catalog-uri, --catalog-name, --warehouse, --log-level) go
// before or after the command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"
	"time"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	// run parses args with fs (already holding the global flags) and runs.
	// It returns the process exit code and an error to print.
	run func(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error)
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// Exit codes. verify uses exitDifferent when an index is not exact.
const (
	exitOK        = 0
	exitDifferent = 1
	exitError     = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// Global flags may come before the command (streamidx --config prod.yaml
	// run), as in git and kubectl, and after it.
	g := &globals{stderr: stderr}
	pre := flag.NewFlagSet("streamidx", flag.ContinueOnError)
	pre.SetOutput(stderr)
	pre.Usage = func() { usage(stderr) }
	g.register(pre)
	if err := pre.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	args = pre.Args()
	if len(args) == 0 || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitError
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "streamidx: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitError
	}
	fs := flag.NewFlagSet("streamidx "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// For measuring: "{cmd}" in a profile's path names the command, so that
	// bench and the children it starts (run, lookup) write their own.
	profilePath := func(env string) string { return strings.ReplaceAll(os.Getenv(env), "{cmd}", c.name) }
	if path := profilePath("STREAMIDX_CPUPROFILE"); path != "" {
		// A CPU profile of the whole command.
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if path := profilePath("STREAMIDX_TRACE"); path != "" {
		// An execution trace of the whole command (go tool trace): where
		// goroutines waited for a core, a lock or the network.
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if trace.Start(f) == nil {
				defer trace.Stop()
			}
		}
	}
	if path := profilePath("STREAMIDX_MEMPROFILE"); path != "" {
		// For measuring: the live heap at the end of the command, with
		// what was allocated where, and in path.peak the heap as the
		// collector last found it when it was at its largest.
		stop := profilePeakHeap(path + ".peak")
		defer stop()
		defer func() {
			if f, err := os.Create(path); err == nil {
				defer f.Close()
				runtime.GC()
				_ = pprof.WriteHeapProfile(f)
			}
		}()
	}
	if path := profilePath(peakRSSEnv); path != "" {
		// For measuring: this process's own peak resident memory, which a
		// parent cannot learn from wait4 (see peakrss.go).
		defer func() {
			if err := writePeakRSS(path); err != nil {
				fmt.Fprintf(stderr, "streamidx %s: write the peak RSS: %v\n", c.name, err)
			}
		}()
	}
	code, err := c.run(ctx, g, fs, args[1:], stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "streamidx %s: %v\n", c.name, g.explain(err))
		if code == exitOK {
			code = exitError
		}
	}
	return code
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: streamidx [global flags] <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nglobal flags (before or after the command): --config FILE, --catalog-uri URI, --catalog-name NAME,")
	fmt.Fprintln(w, "  --warehouse URI, --log-level LEVEL. With nothing given, everything lives in ./streamidx-data/.")
	fmt.Fprintln(w, "Run 'streamidx <command> -h' for a command's flags.")
}

// profilePeakHeap writes a heap profile to path whenever the heap the last
// garbage collection left live is the largest seen, checking five times a
// second, until the returned function is called.
func profilePeakHeap(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak {
				peak = live
				if f, err := os.Create(path); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}
