package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
)

func init() {
	register(command{name: "demo", summary: "everything embedded: a CDC stream on a table while the daemon keeps two indexes fresh, then verify (--tour: step by step)", run: runDemo})
}

// demoDefinitions are the indexes the demo creates on its orders table: a
// primary-key index that locates rows (the equality-delete use case) and a
// secondary index clustered by a bucket of the customer.
var demoDefinitions = map[string]string{
	"pk": `name: pk
identity: [order_id]
materialized: [_file, _pos]
cluster: [order_id]
`,
	"by_customer": `name: by_customer
identity: [customer_id, order_id]
materialized: [_file, _pos, total_cents]
non-materialized: ["bucket(16, customer_id)"]
cluster: ["bucket(16, customer_id)", customer_id, order_id]
`,
}

// demoMarker is the file that marks a directory as the demo's own. The demo
// clears only a directory that carries it, and then only the entries in
// demoEntries, so --dir pointed at the wrong place never deletes anything.
const demoMarker = ".streamidx-demo"

// demoEntries are what a demo run writes into its directory: the SQLite
// catalog (with its journal files), the warehouse, the staging store, the
// index definitions and the streaming demo's daemon log.
var demoEntries = []string{
	"catalog.db", "catalog.db-wal", "catalog.db-shm", "catalog.db-journal",
	"warehouse", "staging", "pk.yaml", "by_customer.yaml", "daemon.log",
}

// prepareDemoDir makes dir ready for a fresh demo run: it creates a missing
// directory, adopts an empty one, and clears what an earlier run left in one
// that carries the marker. Any other directory is refused untouched.
func prepareDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create demo directory: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read demo directory %s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("read demo directory %s: %w", dir, err)
			}
			return fmt.Errorf("demo directory %s is not empty and holds no %s marker, so an earlier demo did not create it: "+
				"the demo replaces its directory's contents and touches no directory it does not own; "+
				"pass --dir with a new or empty directory", dir, demoMarker)
		}
		for _, name := range demoEntries {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("clear the previous demo run in %s: %w", dir, err)
			}
		}
	}
	marker := "This directory was created by `streamidx demo`, which replaces its catalog, warehouse, staging and definitions on every run.\n"
	if err := os.WriteFile(filepath.Join(dir, demoMarker), []byte(marker), 0o644); err != nil {
		return fmt.Errorf("mark demo directory: %w", err)
	}
	return nil
}

// demoStep runs one streamidx command as the demo's user would type it,
// on the demo's catalog and warehouse (base), and prints the command first.
func demoStep(ctx context.Context, g *globals, stdout io.Writer, base []string, title string, args ...string) error {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	fmt.Fprintf(stdout, "\n== %s\n$ streamidx %s\n", title, strings.Join(quoted, " "))
	c := commands[args[0]]
	sub := flag.NewFlagSet("streamidx "+c.name, flag.ContinueOnError)
	sub.SetOutput(g.stderr)
	sg := &globals{stderr: g.stderr, logLevel: g.logLevel}
	sg.register(sub)
	code, err := c.run(ctx, sg, sub, append(append([]string{}, args[1:]...), base...), stdout)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if code != exitOK {
		return fmt.Errorf("%s exited %d", args[0], code)
	}
	return nil
}

// demoBase are the flags that point a command at the demo's catalog and
// warehouse in dir.
func demoBase(g *globals, dir string) []string {
	base := []string{"--catalog-uri", config.SQLiteURI(filepath.Join(dir, "catalog.db")), "--warehouse", format.FileURI(filepath.Join(dir, "warehouse"))}
	if g.configPath != "" {
		base = append(base, "--config", g.configPath)
	}
	return base
}

func runDemo(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	dir := fs.String("dir", "streamidx-demo", "`directory` for the demo's catalog and warehouse: new, empty, or one an earlier demo made (whose files it replaces)")
	rowsN := fs.Int64("rows", 0, "orders in the table (default 100000; 1000000 with --tour)")
	duration := fs.Duration("duration", time.Minute, "how long the CDC stream runs")
	upserts := fs.Int64("upserts", 500, "orders each commit of the stream upserts")
	httpAddr := fs.String("http", "127.0.0.1:0", "listen `address` of the daemon's /metrics (port 0: a free port)")
	tour := fs.Bool("tour", false, "instead of the stream, walk step by step through gen-table, create, build, lookup, one upsert, run --once and verify")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return exitError, err
	}
	if err := prepareDemoDir(abs); err != nil {
		return exitError, err
	}
	if *tour {
		if *rowsN == 0 {
			*rowsN = 1_000_000
		}
		return runDemoTour(ctx, g, abs, *rowsN, stdout)
	}
	if *rowsN == 0 {
		*rowsN = 100_000
	}
	return runDemoStream(ctx, g, streamDemo{dir: abs, rows: *rowsN, upserts: *upserts, duration: *duration, http: *httpAddr,
		stdout: stdout, live: isTerminal(stdout)})
}

// runDemoTour is the step-by-step walk: every command a user would type,
// one after the other, with its output.
func runDemoTour(ctx context.Context, g *globals, abs string, rows int64, stdout io.Writer) (int, error) {
	base := demoBase(g, abs)
	step := func(title string, args ...string) error { return demoStep(ctx, g, stdout, base, title, args...) }
	if os.Getenv("STREAMIDX_BUILD_TARGET_FILE_SIZE") == "" {
		// Small range files, so that an update visibly rewrites only some.
		os.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "1MiB")
	}
	began := time.Now()
	if err := step("write a table of orders (embedded SQLite catalog, local warehouse)",
		"gen-table", "--table", "demo.orders", "--rows", fmt.Sprint(rows), "--commits", "4"); err != nil {
		return exitError, err
	}
	for _, name := range []string{"pk", "by_customer"} {
		path := filepath.Join(abs, name+".yaml")
		if err := os.WriteFile(path, []byte(demoDefinitions[name]), 0o644); err != nil {
			return exitError, err
		}
		fmt.Fprintf(stdout, "\n-- %s\n%s", path, demoDefinitions[name])
		if err := step("define index "+name, "create", "--table", "demo.orders", "--def", path); err != nil {
			return exitError, err
		}
		if err := step("build index "+name, "build", "--table", "demo.orders", "--index", name); err != nil {
			return exitError, err
		}
		if err := step("verify index "+name+" against a full scan", "verify", "--table", "demo.orders", "--index", name); err != nil {
			return exitError, err
		}
	}
	if err := step("look up one order through the primary-key index", "lookup", "--table", "demo.orders", "--index", "pk",
		"--where", "order_id = 4242", "--explain"); err != nil {
		return exitError, err
	}
	if err := step("look up a customer's orders through the bucketed secondary index", "lookup", "--table", "demo.orders",
		"--index", "by_customer", "--where", "customer_id = 7", "--limit", "5"); err != nil {
		return exitError, err
	}
	upserts := min(10_000, rows/10)
	if err := step("a CDC upsert commit: equality deletes + new versions of existing orders", "gen-table", "--table", "demo.orders",
		"--rows", fmt.Sprint(rows), "--upsert", fmt.Sprint(upserts), "--pattern", "tail"); err != nil {
		return exitError, err
	}
	if err := step("the updater aligns both indexes with the new snapshot, rewriting only touched range files", "run", "--once",
		"--table", "demo.orders", "--index", "pk", "--table", "demo.orders", "--index", "by_customer",
		"--stage-dir", filepath.Join(abs, "staging")); err != nil {
		return exitError, err
	}
	for _, name := range []string{"pk", "by_customer"} {
		if err := step("verify index "+name+" after the update", "verify", "--table", "demo.orders", "--index", name); err != nil {
			return exitError, err
		}
	}
	if err := step("list the indexes", "list", "--table", "demo.orders"); err != nil {
		return exitError, err
	}
	if err := step("inspect by_customer", "inspect", "--table", "demo.orders", "--index", "by_customer"); err != nil {
		return exitError, err
	}
	fmt.Fprintf(stdout, "\ndemo finished in %s; everything is in %s\n", time.Since(began).Round(time.Millisecond), abs)
	return exitOK, nil
}
