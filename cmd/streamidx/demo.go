package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func init() {
	register(command{name: "demo", summary: "everything embedded: write a table, index it, look up, upsert, update and verify", run: runDemo})
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

func runDemo(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	dir := fs.String("dir", "streamidx-demo", "`directory` for the demo's catalog and warehouse (removed first)")
	rowsN := fs.Int64("rows", 1_000_000, "orders to write")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return exitError, err
	}
	if err := os.RemoveAll(abs); err != nil {
		return exitError, fmt.Errorf("clear demo directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return exitError, err
	}
	base := []string{"--catalog-uri", "sqlite://" + filepath.Join(abs, "catalog.db"), "--warehouse", "file://" + filepath.Join(abs, "warehouse")}
	if g.configPath != "" {
		base = append(base, "--config", g.configPath)
	}
	step := func(title string, args ...string) error {
		fmt.Fprintf(stdout, "\n== %s\n$ streamidx %s\n", title, strings.Join(args, " "))
		c := commands[args[0]]
		sub := flag.NewFlagSet("streamidx "+c.name, flag.ContinueOnError)
		sub.SetOutput(g.stderr)
		sg := &globals{stderr: g.stderr}
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
	if os.Getenv("STREAMIDX_BUILD_TARGET_FILE_SIZE") == "" {
		// Small range files, so that an update visibly rewrites only some.
		os.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "1MiB")
	}
	began := time.Now()
	if err := step("write a table of orders (embedded SQLite catalog, local warehouse)",
		"gen-table", "--table", "demo.orders", "--rows", fmt.Sprint(*rowsN), "--commits", "4"); err != nil {
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
	upserts := min(10_000, *rowsN/10)
	if err := step("a CDC upsert commit: equality deletes + new versions of existing orders", "gen-table", "--table", "demo.orders",
		"--rows", fmt.Sprint(*rowsN), "--upsert", fmt.Sprint(upserts), "--pattern", "tail"); err != nil {
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
