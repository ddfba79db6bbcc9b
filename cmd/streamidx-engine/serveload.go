package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/client"
)

func init() {
	register(command{name: "serve-load", summary: "measure one-key lookups through the lookup service, whole lookup processes and iceberg-go scans (measurements)", run: runServeLoad})
}

// runServeLoad measures one-key lookups of random keys three ways, one
// after the other with the same concurrency: through a running lookup
// service, as whole `streamidx lookup` processes, and as iceberg-go scans
// filtered on the key in this process (the table loaded once).
func runServeLoad(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	url := fs.String("url", "http://127.0.0.1:9464", "base `URL` of the lookup service (streamidx run --serve, streamidx serve)")
	tableName := fs.String("table", "", "table `NS.TABLE`")
	index := fs.String("index", "pk", "index `name`")
	column := fs.String("column", "id", "long `column` the keys are values of")
	keys := fs.Int64("keys", 1_000_000, "keys are drawn from [0, `N`)")
	clients := fs.Int("clients", 8, "concurrent `clients`")
	duration := fs.Duration("duration", 60*time.Second, "length of the service run")
	rate := fs.Float64("rate", 0, "offer the service's lookups at `N` per second, each latency counted from when it was due (0: each client asks again as soon as answered)")
	snapshot := fs.Int64("snapshot", 0, "table snapshot `id` the lookups are exact for (default: the current one)")
	caFile := fs.String("ca-file", "", "PEM `file` of the certificate (or its authority) an https:// service presents, when the system does not trust it")
	others := fs.Duration("others-duration", 20*time.Second, "length of the process and scan runs (0 skips them)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if err := requireFlags(fs, "table"); err != nil {
		return exitError, err
	}
	if *keys < 1 || *clients < 1 || *rate < 0 {
		return exitError, fmt.Errorf("want --keys >= 1, --clients >= 1 and --rate >= 0")
	}
	where := func() (int64, string) {
		k := rand.Int64N(*keys)
		return k, fmt.Sprintf("%s = %d", *column, k)
	}
	copts := client.Options{Token: os.Getenv("STREAMIDX_SERVE_TOKEN")}
	if *caFile != "" {
		tlsConfig, err := client.LoadCA(*caFile)
		if err != nil {
			return exitError, err
		}
		copts.TLSConfig = tlsConfig
	}
	c := client.New(*url, copts)
	var results []struct {
		mode string
		r    client.LoadResult
	}
	add := func(mode string, r client.LoadResult) {
		results = append(results, struct {
			mode string
			r    client.LoadResult
		}{mode, r})
	}
	lookup := func(ctx context.Context, _, _ int) error {
		_, w := where()
		_, err := c.Lookup(ctx, *tableName, *index, client.Request{Where: w, Snapshot: *snapshot})
		return err
	}
	if *rate > 0 {
		add(fmt.Sprintf("service at %g/s", *rate), client.RunLoadRate(ctx, *clients, *duration, *rate, lookup))
	} else {
		add("service", client.RunLoad(ctx, *clients, *duration, lookup))
	}
	if *others > 0 {
		self, err := frontBinary()
		if err != nil {
			return exitError, err
		}
		base := globalArgs(g)
		add("process", client.RunLoad(ctx, *clients, *others, func(ctx context.Context, _, _ int) error {
			_, w := where()
			cmd := exec.CommandContext(ctx, self, append([]string{"lookup"}, append(base, "--table", *tableName, "--index", *index, "--where", w, "--json", "--snapshot", fmt.Sprint(*snapshot))...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("streamidx lookup: %w: %s", err, out)
			}
			return nil
		}))
		tbl, e, err := openTable(ctx, g, fs, *tableName)
		if err != nil {
			return exitError, err
		}
		defer e.Close()
		add("iceberg-go scan", client.RunLoad(ctx, *clients, *others, func(ctx context.Context, _, _ int) error {
			k, _ := where()
			opts := []table.ScanOption{table.WithRowFilter(iceberg.EqualTo(iceberg.Reference(*column), k))}
			if *snapshot != 0 {
				opts = append(opts, table.WithSnapshotID(*snapshot))
			}
			_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
			if err != nil {
				return err
			}
			for rec, err := range recs {
				if err != nil {
					return err
				}
				rec.Release()
			}
			return nil
		}))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "MODE\tCLIENTS\tSECONDS\tLOOKUPS\tERRORS\tP50\tP99\tLOOKUPS/S\tLATE\n")
	for _, x := range results {
		r := x.r
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t%s\t%s\t%.1f\t%d\n", x.mode, r.Clients, r.Duration.Seconds(), r.Lookups, r.Errors,
			r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.PerSecond, r.Late)
	}
	if err := tw.Flush(); err != nil {
		return exitError, err
	}
	for _, x := range results {
		if x.r.FirstError != nil {
			fmt.Fprintf(stdout, "%s: first error: %v\n", x.mode, x.r.FirstError)
		}
	}
	return exitOK, nil
}

// globalArgs repeats the global flags given to this process, for the
// processes it starts.
func globalArgs(g *globals) []string {
	var out []string
	for flagName, v := range map[string]string{"config": g.configPath, "catalog-uri": g.catalogURI,
		"catalog-name": g.catalogName, "warehouse": g.warehouse, "log-level": g.logLevel} {
		if v != "" {
			out = append(out, "--"+flagName, v)
		}
	}
	return out
}
