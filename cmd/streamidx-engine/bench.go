package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	register(command{name: "bench", summary: "the performance table: measure streamidx on a synthetic table and print every figure", run: runBench})
}

// benchGroups are the measurements of `streamidx bench`, in the order they
// run. Each is a function that measures one thing on b's scale and adds its
// figures with b.add; a new figure is a new function here.
var benchGroups = []struct {
	name string
	run  func(ctx context.Context, b *bench) error
}{
	{"build", benchBuild},
	{"incremental", benchIncremental},
	{"lookup", benchLookup},
	{"service", benchService},
	{"daemon", benchDaemon},
	{"scan", benchScan},
	{"events", benchEvents},
	{"verify", benchVerify},
	{"freshness", benchFreshness},
}

// benchScales are the table sizes of --scale.
var benchScales = map[string]int64{"small": 1_000_000, "medium": 10_000_000}

// figure is one measured number, as the JSON output has it.
type figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Baseline names what the value is compared with, BaselineValue is its
	// value and Ratio value/baseline; null when there is no baseline.
	Baseline      string   `json:"baseline"`
	BaselineValue *float64 `json:"baseline_value"`
	Ratio         *float64 `json:"ratio"`
	// Goal states the target, Met whether the value reaches it; null when
	// the figure has no goal.
	Goal string `json:"goal"`
	Met  *bool  `json:"met"`
}

// bench is one run of `streamidx bench`.
type bench struct {
	g     *globals
	dir   string // absolute: the bench's own directory
	scale string
	rows  int64
	only  []string
	// Stream of each freshness scenario: its length and commit interval.
	duration, interval time.Duration
	drain              time.Duration
	verify             string // none, final or all
	progress           io.Writer
	log                *slog.Logger // the daemons' and builds' log, to dir/bench.log
	figures            []figure
	// cdcBuild is the build group's child build on the CDC table, the
	// baseline of verify; nil when the build group did not run.
	cdcBuild *childRun
}

func runBench(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	scale := fs.String("scale", "small", "table `size`: small (1M orders) or medium (10M)")
	rowsFlag := fs.Int64("rows", 0, "orders in the table, instead of the scale's (for trials)")
	jsonPath := fs.String("json", "", "also write the figures as JSON to `file`")
	only := fs.String("only", "", "run only the figures under these comma-separated dotted `names` (e.g. freshness.tail-1000,freshness.uniform-1000.latest)")
	dir := fs.String("dir", "streamidx-bench", "`directory` for the bench's table, indexes and log; a table of the same scale found there is reused")
	duration := fs.Duration("duration", 2*time.Minute, "length of each streaming scenario")
	interval := fs.Duration("interval", time.Second, "time between the commits of a stream")
	drain := fs.Duration("drain", time.Minute, "how long to wait after a stream for the indexes to cover its last commit")
	verifyMode := fs.String("verify", "final", "after each scenario verify none, the final index snapshot of each index (final), or every index snapshot the stream produced (all)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	rows, ok := benchScales[*scale]
	if !ok {
		return exitError, fmt.Errorf("--scale %q: want small or medium", *scale)
	}
	if *rowsFlag > 0 {
		rows = *rowsFlag
	}
	switch *verifyMode {
	case "none", "final", "all":
	default:
		return exitError, fmt.Errorf("--verify %q: want none, final or all", *verifyMode)
	}
	if *duration <= 0 || *interval <= 0 || *drain < 0 {
		return exitError, errors.New("--duration and --interval must be positive, --drain not negative")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return exitError, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return exitError, fmt.Errorf("create bench directory: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(abs, "bench.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return exitError, err
	}
	defer logFile.Close()
	b := &bench{g: g, dir: abs, scale: *scale, rows: rows, duration: *duration, interval: *interval, drain: *drain,
		verify: *verifyMode, progress: g.stderr, log: slog.New(slog.NewTextHandler(logFile, nil))}
	for _, p := range strings.Split(*only, ",") {
		if p = strings.TrimSpace(p); p != "" {
			b.only = append(b.only, p)
		}
	}
	began := time.Now()
	for _, grp := range benchGroups {
		if !b.want(grp.name) {
			continue
		}
		load := loadAverage()
		if err := grp.run(ctx, b); err != nil {
			b.print(stdout)
			return exitError, fmt.Errorf("bench %s: %w", grp.name, err)
		}
		// The machine's load around the group: its figures are as noisy as
		// the load is above the cores.
		var before, after float64
		if _, err := fmt.Sscan(load+" "+loadAverage(), &before, &after); err == nil {
			b.add(figure{Name: grp.name + ".load_avg", Value: (before + after) / 2, Unit: "runnable"})
		}
	}
	b.print(stdout)
	fmt.Fprintf(stdout, "\n%d figures in %s (scale %s, %d orders); log in %s\n", len(b.figures),
		time.Since(began).Round(time.Second), b.scale, b.rows, filepath.Join(abs, "bench.log"))
	if *jsonPath != "" {
		data, err := json.MarshalIndent(b.figures, "", "  ")
		if err != nil {
			return exitError, err
		}
		if err := os.WriteFile(*jsonPath, append(data, '\n'), 0o644); err != nil {
			return exitError, fmt.Errorf("write %s: %w", *jsonPath, err)
		}
	}
	for _, f := range b.figures {
		if f.Met != nil && !*f.Met {
			return exitDifferent, nil
		}
	}
	return exitOK, nil
}

// want reports whether figures named name (or under it) are to be
// measured. Names are dotted paths (group.scenario.index.figure); --only
// lists leading parts of paths, and a name is wanted when one of them leads
// it, or when it leads one of them (a group or scenario that holds wanted
// figures).
func (b *bench) want(name string) bool {
	if len(b.only) == 0 {
		return true
	}
	leads := func(a, b string) bool { return a == b || strings.HasPrefix(b, a+".") }
	for _, p := range b.only {
		if leads(p, name) || leads(name, p) {
			return true
		}
	}
	return false
}

// add records a figure, unless --only leaves it out.
func (b *bench) add(f figure) {
	if !b.want(f.Name) {
		return
	}
	if f.BaselineValue != nil && *f.BaselineValue != 0 {
		r := f.Value / *f.BaselineValue
		f.Ratio = &r
	}
	b.figures = append(b.figures, f)
}

// note prints a progress line with the time and the machine's load.
func (b *bench) note(format string, args ...any) {
	fmt.Fprintf(b.progress, "bench %s [load %s] %s\n", time.Now().Format("15:04:05"), loadAverage(), fmt.Sprintf(format, args...))
}

// loadAverage is the one-minute load average, or "?" where there is none.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// print writes the figures as one table.
func (b *bench) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tunit\tbaseline\tratio\tgoal\tmet")
	for _, f := range b.figures {
		baseline, ratio, met := "", "", ""
		if f.BaselineValue != nil {
			baseline = fmt.Sprintf("%s %s", formatFigure(*f.BaselineValue), f.Baseline)
		}
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2fx", *f.Ratio)
		}
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, formatFigure(f.Value), f.Unit, baseline, ratio, f.Goal, met)
	}
	tw.Flush()
}

func formatFigure(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15 && v > -1e15:
		return fmt.Sprintf("%d", int64(v))
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// ptr returns a pointer to v, for the optional fields of a figure.
func ptr[T any](v T) *T { return &v }
