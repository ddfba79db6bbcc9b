package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/workload"
)

// TestBenchFreshnessFigures runs one freshness scenario of `streamidx bench`
// on a small table: it prints one table and writes every figure of both
// indexes as JSON, and the index snapshots the stream produced verify.
func TestBenchFreshnessFigures(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "streamidx.yaml")
	if err := os.WriteFile(cfg, []byte("build:\n  target-file-size: 16KiB\n  row-group-rows: 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	byName, stdout := benchFigures(t, dir, "--config", cfg, "--rows", "3000", "--duration", "2s", "--interval", "500ms", "--drain", "30s",
		"--verify", "all", "--only", "freshness.tail-1000.latest")
	for name := range byName {
		if !strings.HasPrefix(name, "freshness.tail-1000.latest.") {
			t.Errorf("figure %s is outside --only", name)
		}
	}
	if got := byName["freshness.tail-1000.latest.commits"]; got == nil || got["value"].(float64) != 4 {
		t.Errorf("commits: %v, want 4 (2s at one commit per 500ms)", got)
	}
	for _, index := range []string{"pk", "by_customer"} {
		p := "freshness.tail-1000.latest." + index + "."
		for _, fig := range []string{"lag_p50", "lag_p99", "lag_max", "lag_growth", "uncovered", "index_snapshots", "entries_rewritten", "bytes_written"} {
			if byName[p+fig] == nil {
				t.Errorf("no figure %s", p+fig)
			}
		}
		if n := byName[p+"index_snapshots"]; n == nil || n["value"].(float64) < 1 {
			t.Errorf("%s published no index snapshot: %v", index, n)
		}
		if u := byName[p+"uncovered"]; u == nil || u["value"].(float64) != 0 {
			t.Errorf("%s left commits uncovered after the drain: %v", index, u)
		}
		exact := byName[p+"exact"]
		if exact == nil || exact["met"] != true || exact["value"] != byName[p+"index_snapshots"]["value"] {
			t.Errorf("%s: every index snapshot the stream produced must verify: %v", index, exact)
		}
	}
	if !strings.Contains(stdout, "freshness.tail-1000.latest.pk.lag_p99") {
		t.Errorf("the table lacks the figures:\n%s", stdout)
	}
}

// TestBenchRewriteFreshnessFigures runs the scenario in which the daemon
// keeps pk fresh under uniform upserts and turns their equality deletes
// into deletion vectors as it goes: after the drain the table holds no
// equality delete, the rewrites are counted, and pk's snapshots verify.
func TestBenchRewriteFreshnessFigures(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "streamidx.yaml")
	if err := os.WriteFile(cfg, []byte("build:\n  target-file-size: 16KiB\n  row-group-rows: 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const sc = "freshness.uniform-10000.adaptive-rewrite"
	byName, _ := benchFigures(t, dir, "--config", cfg, "--rows", "20000", "--duration", "2s", "--interval", "500ms", "--drain", "60s",
		"--verify", "final", "--only", sc)
	p := sc + ".pk."
	if n := byName[p+"rewrites"]; n == nil || n["value"].(float64) < 1 {
		t.Errorf("no rewrite counted: %v", n)
	}
	if n := byName[p+"rewrite_positions"]; n == nil || n["value"].(float64) < 1 {
		t.Errorf("no position rewritten: %v", n)
	}
	if left := byName[p+"equality_deletes_left"]; left == nil || left["value"].(float64) != 0 || left["met"] != true {
		t.Errorf("equality deletes left after the drain: %v", left)
	}
	if u := byName[p+"uncovered"]; u == nil || u["value"].(float64) != 0 {
		t.Errorf("pk left commits uncovered after the drain: %v", u)
	}
	if exact := byName[p+"exact"]; exact == nil || exact["met"] != true {
		t.Errorf("pk's last snapshot must verify: %v", exact)
	}
}

// TestBenchFigureGroups runs every group of `streamidx bench` but the
// freshness streams (TestBenchFreshnessFigures runs one) on a tiny table
// (the lookup service for 4 s, its baselines for 5 s each),
// with the child processes being this test binary acting as the command
// and a streamidx-client built for the test:
// each group produces its figures, those compared with a baseline carry it
// and the ratio, and the JSON has every field of the issue.
func TestBenchFigureGroups(t *testing.T) {
	t.Setenv("STREAMIDX_TEST_AS_COMMAND", "1") // for the child processes
	t.Setenv(clientBinaryEnv, buildCommand(t, "streamidx-client"))
	// The streamidx measured hands what it does not answer to this test
	// binary, acting as streamidx-engine.
	t.Setenv(frontBinaryEnv, buildCommand(t, "streamidx"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMIDX_ENGINE", self)
	dir := t.TempDir()
	byName, stdout := benchFigures(t, dir, "--rows", "5000", "--only", "build,incremental,lookup,service,daemon,scan,events,verify", "--duration", "4s")
	withBaseline := []string{"build.cdc-50-upserts.rows_per_s", "build.cdc-50-upserts.peak_rss",
		"incremental.tail-0.1pct.time", "incremental.tail-0.1pct.p50", "incremental.tail-0.1pct.p99", "incremental.uniform-0.1pct.time",
		"lookup.point.in_process", "lookup.point.process", "lookup.in10k.in_process",
		"scan.equality_deletes", "scan.after_rewrite_deletes", "scan.rewrite_deletes_time",
		"verify.time", "verify.peak_rss", "service.p99", "service.throughput", "service.scan_throughput",
		"service.server_p99", "service.saturated_server_p99", "service.echo_p99", "service.echo_saturated_p99", "service.echo_throughput",
		"lookup.point.client_process", "lookup.point.engine_process", "service.client_process_throughput", "service.client_process_p50", "service.client_process_p99"}
	withGoal := []string{"build.append.rows_per_s", "build.append.peak_rss", "build.cdc-50-upserts.cores_busy",
		"incremental.tail-0.1pct.p99", "incremental.uniform-0.1pct.entries_per_s", "events.staged_per_s", "daemon.rss"}
	// Range files rewritten beside those reused, which a tiny index has none of.
	for _, name := range append(append(withBaseline, withGoal...), "incremental.tail-0.1pct.files_rewritten", "events.mb_per_s", "service.daemon_rss",
		"service.machine_pause_max") {
		f := byName[name]
		if f == nil {
			t.Errorf("no figure %s", name)
			continue
		}
		if v, ok := f["value"].(float64); !ok || v <= 0 {
			t.Errorf("%s: value %v, want a positive number", name, f["value"])
		}
	}
	for _, name := range withBaseline {
		if f := byName[name]; f != nil && (f["baseline"] == "" || f["baseline_value"] == nil || f["ratio"] == nil) {
			t.Errorf("%s lacks its baseline: %v", name, f)
		}
	}
	for _, name := range withGoal {
		if f := byName[name]; f != nil && (f["goal"] == "" || f["met"] == nil) {
			t.Errorf("%s lacks its goal: %v", name, f)
		}
	}
	for _, name := range withBaseline {
		if !strings.Contains(stdout, name) {
			t.Errorf("the table lacks %s:\n%s", name, stdout)
		}
	}
}

// benchFigures runs `streamidx bench` with args in dir, accepts a missed goal
// (exit 1: a loaded machine may cause one), and returns its figures by
// name, each checked for every field of the JSON, and what it printed.
func benchFigures(t *testing.T, dir string, args ...string) (map[string]map[string]any, string) {
	t.Helper()
	out := filepath.Join(dir, "figures.json")
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"bench", "--dir", filepath.Join(dir, "bench"), "--json", out}, args...), &stdout, &stderr)
	if code != exitOK && code != exitDifferent {
		t.Fatalf("bench: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var figures []map[string]any
	if err := json.Unmarshal(data, &figures); err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]any{}
	for _, f := range figures {
		for _, key := range []string{"name", "value", "unit", "baseline", "baseline_value", "ratio", "goal", "met"} {
			if _, ok := f[key]; !ok {
				t.Fatalf("figure %v has no %q", f, key)
			}
		}
		byName[f["name"].(string)] = f
	}
	return byName, stdout.String()
}

// The service's latency from its own histogram, between two readings, as
// Prometheus's histogram_quantile estimates it.
func TestLookupHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := lookupHistogram{{0.0005, 100}, {0.001, 150}, {0.002, 160}, {0.004, 160}, {inf, 160}}
	// 1,000 lookups since: 900 under 0.5 ms, 80 more under 1 ms, 10 under
	// 2 ms, 10 under 4 ms.
	after := lookupHistogram{{0.0005, 1000}, {0.001, 1130}, {0.002, 1150}, {0.004, 1160}, {inf, 1160}}
	for _, c := range []struct {
		q, want float64
	}{
		{0.5, 0.0005 * 500 / 900},                     // in the first bucket, from 0
		{0.95, 0.0005 + 0.0005*(950-900)/float64(80)}, // in the second
		{0.99, 0.002}, // the top of the third
		{0.995, 0.002 + 0.002*(995-990)/float64(10)}, // in the fourth
	} {
		got, ok := after.quantile(c.q, before)
		if !ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile %v: %v (%v), want %v", c.q, got, ok, c.want)
		}
	}
	// Lookups slower than every bound: the largest finite one.
	slow := lookupHistogram{{0.0005, 100}, {0.001, 150}, {0.002, 160}, {0.004, 160}, {inf, 260}}
	if got, ok := slow.quantile(0.99, before); !ok || got != 0.004 {
		t.Errorf("all in +Inf: %v (%v), want 0.004", got, ok)
	}
	if _, ok := before.quantile(0.99, before); ok {
		t.Error("no lookups between the readings: a quantile, want none")
	}
	if _, ok := after.quantile(0.99, nil); ok {
		t.Error("no reading before: a quantile, want none")
	}
}

// TestMeasureLagsCountsRewriteSnapshots: an index snapshot of a snapshot
// that the daemon's rewrite committed after the stream's commits covers
// them, as one of the last commit would.
func TestMeasureLagsCountsRewriteSnapshots(t *testing.T) {
	commits := []workload.Commit{{SnapshotID: 10, TimestampMs: 1000}, {SnapshotID: 11, TimestampMs: 2000}, {SnapshotID: 12, TimestampMs: 3000}}
	const rewrite = 99 // committed after 12
	newest := map[int64]int{10: 0, 11: 1, 12: 2, rewrite: 2}
	snaps := []format.Snapshot{{SourceTableSnapshotID: 10, TimestampMs: 1500}, {SourceTableSnapshotID: rewrite, TimestampMs: 4000}}
	r := measureLags(commits, snaps, time.UnixMilli(9000), newest)
	if r.uncovered != 0 {
		t.Errorf("%d commits uncovered, want 0", r.uncovered)
	}
	if want := []float64{0.5, 2, 1}; !slices.Equal(r.lags, want) {
		t.Errorf("lags %v, want %v", r.lags, want)
	}
}
