// Command streamidx-client asks a running lookup service (`streamidx
// serve`, `streamidx run --serve`) what `streamidx lookup --json`, `list
// --json` and `inspect --json` would print, without reading the catalog or
// any file itself.
//
// It exists for scripts that look keys up one process at a time. A whole
// `streamidx lookup` process spends about 90 ms starting, most of it in the
// package initialisation of iceberg-go's table packages, before it reads
// anything; this command links only the standard library, arrow-go and the
// service's vocabulary (packages client and api), and starts in a few
// milliseconds.
//
//	streamidx-client lookup --table sales.orders --index pk --where 'id = 42'
//	streamidx-client list --table sales.orders
//	streamidx-client inspect --table sales.orders --index pk
//
// The service is --server, or $STREAMIDX_SERVER, or http://127.0.0.1:9465;
// the token is $STREAMIDX_SERVE_TOKEN.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/streamidx/streamidx/api"
	"github.com/streamidx/streamidx/client"
	"github.com/streamidx/streamidx/internal/buildinfo"
	"github.com/streamidx/streamidx/internal/predicatearg"
)

// Exit statuses: as `streamidx lookup`'s (0, or 2 on any error).
const (
	exitOK    = 0
	exitError = 2
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: streamidx-client COMMAND [flags]

Asks a running streamidx lookup service (streamidx serve, streamidx run --serve).

commands:
  lookup    the rows matching a predicate, as streamidx lookup --json prints them
  list      the indexes of a table, as the service lists them
  inspect   an index and the range files of one of its snapshots, as streamidx inspect --json
  version   the version, the commit it was built from and the Go version

Run streamidx-client COMMAND -h for the flags of a command.
`

// run is the command with its arguments and streams; it returns the exit
// status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, args := args[0], args[1:]
	if cmd == "version" || cmd == "--version" {
		fmt.Fprintln(stdout, buildinfo.String("streamidx-client"))
		return exitOK
	}
	fs := flag.NewFlagSet("streamidx-client "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("STREAMIDX_SERVER", "http://127.0.0.1:9465"), "base `URL` of the lookup service (default $STREAMIDX_SERVER, or http://127.0.0.1:9465)")
	caFile := fs.String("ca-file", "", "PEM `file` of the certificate (or its authority) an https:// service presents, when the system does not trust it")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long, retries included")
	retries := fs.Int("retries", 2, "ask again up to `N` times when the service answers 503 overloaded (after its Retry-After) or refuses the connection (a restart)")
	tableName := fs.String("table", "", "table `NS.TABLE`")
	var err error
	switch cmd {
	case "lookup":
		index := fs.String("index", "", "index `name`")
		where := fs.String("where", "", "predicate, as streamidx lookup --where takes it; - reads it from standard input")
		whereFile := fs.String("where-file", "", "read the predicate from `file` (for predicates longer than a command line holds)")
		snapshot := fs.Int64("snapshot", 0, "table snapshot `id` the answer is exact for (default: current)")
		limit := fs.Int64("limit", 0, "stop after `N` rows (default: no limit, up to the service's serve.max-rows)")
		explain := fs.Bool("explain", false, "print the plan and what was read after the rows")
		header := fs.Bool("header", false, "print the answer's header line (the index and table snapshots it used) before the rows")
		arrowOut := fs.String("arrow", "", "write the rows as an Arrow IPC stream to `file` (- for standard output) instead of JSON lines; with --header, the snapshots go to standard error")
		if code, ok := parse(fs, args, stderr, "table", "index"); !ok {
			return code
		}
		err = withClient(ctx, *server, *caFile, *timeout, *retries, func(ctx context.Context, c *client.Client) error {
			w, err := predicatearg.Read(*where, *whereFile, stdin)
			if err != nil {
				return err
			}
			q := client.Request{Where: w, Snapshot: *snapshot, Limit: *limit, Explain: *explain}
			if *arrowOut != "" {
				return writeArrow(ctx, c, *tableName, *index, q, *arrowOut, *header, stdout, stderr)
			}
			ans, err := c.Lookup(ctx, *tableName, *index, q)
			if err != nil {
				return err
			}
			return writeAnswer(stdout, ans, *header)
		})
	case "list":
		if code, ok := parse(fs, args, stderr, "table"); !ok {
			return code
		}
		err = withClient(ctx, *server, *caFile, *timeout, *retries, func(ctx context.Context, c *client.Client) error {
			entries, err := c.Indexes(ctx, *tableName)
			if err != nil {
				return err
			}
			return writeJSON(stdout, entries)
		})
	case "inspect":
		index := fs.String("index", "", "index `name`")
		snapshot := fs.Int64("snapshot", 0, "index snapshot `id`, or the table snapshot it was built for, whose range files are listed (default: current)")
		if code, ok := parse(fs, args, stderr, "table", "index"); !ok {
			return code
		}
		err = withClient(ctx, *server, *caFile, *timeout, *retries, func(ctx context.Context, c *client.Client) error {
			out, err := c.Inspect(ctx, *tableName, *index, *snapshot)
			if err != nil {
				return err
			}
			return writeJSON(stdout, out)
		})
	default:
		fmt.Fprintf(stderr, "streamidx-client: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "streamidx-client %s: %v\n", cmd, err)
		if errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(stderr, "streamidx-client %s: nothing listens at %s: start streamidx serve (or run --serve) there, or name the service with --server or STREAMIDX_SERVER\n",
				cmd, *server)
		}
		return exitError
	}
	return exitOK
}

// parse parses the flags and checks that the required ones are set. ok is
// false when the command is to end with code (after -h, or a usage error).
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, required ...string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return exitUsage, false
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			fmt.Fprintf(stderr, "%s: missing --%s\n", fs.Name(), name)
			return exitUsage, false
		}
	}
	return exitOK, true
}

// withClient calls do with a client of the service at server, bounded by
// timeout.
func withClient(ctx context.Context, server, caFile string, timeout time.Duration, retries int, do func(context.Context, *client.Client) error) error {
	if retries < 0 {
		return fmt.Errorf("--retries %d: want 0 or more", retries)
	}
	opts := client.Options{Token: os.Getenv("STREAMIDX_SERVE_TOKEN"), Retry: client.Retry{Attempts: retries}}
	if caFile != "" {
		tlsConfig, err := client.LoadCA(caFile)
		if err != nil {
			return err
		}
		opts.TLSConfig = tlsConfig
	}
	c := client.New(server, opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return do(ctx, c)
}

// writeAnswer prints the rows of ans and its plan line, as `streamidx
// lookup --json [--explain]` prints them, after the header line when
// header is set.
func writeAnswer(w io.Writer, ans *client.Answer, header bool) error {
	var buf []byte
	if header {
		h, err := json.Marshal(api.HeaderLine{Streamidx: ans.Header})
		if err != nil {
			return err
		}
		buf = append(append(buf, h...), '\n')
	}
	for _, r := range ans.Rows {
		buf = append(append(buf, r...), '\n')
	}
	if ans.Explain != nil {
		buf = append(append(buf, ans.Explain...), '\n')
	}
	_, err := w.Write(buf)
	return err
}

// writeArrow writes the Arrow IPC answer to q to the file out (- for
// stdout), and with header the snapshots it was read from and is exact for
// to stderr. A file is written whole or not at all: to a temporary name
// beside it, renamed at the end.
func writeArrow(ctx context.Context, c *client.Client, tableName, index string, q client.Request, out string, header bool, stdout, stderr io.Writer) error {
	if q.Explain {
		return errors.New("--explain comes with the JSON lines answer, not with --arrow")
	}
	w, done := stdout, func(err error) error { return err }
	if out != "-" {
		f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
		if err != nil {
			return fmt.Errorf("--arrow: %w", err)
		}
		w = f
		done = func(err error) error {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(f.Name(), out)
			}
			if err != nil {
				os.Remove(f.Name())
			}
			return err
		}
	}
	indexSnap, tableSnap, err := c.LookupArrowTo(ctx, tableName, index, q, w)
	if err = done(err); err != nil {
		return err
	}
	if header {
		fmt.Fprintf(stderr, "index snapshot %d, exact for table snapshot %d\n", indexSnap, tableSnap)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
