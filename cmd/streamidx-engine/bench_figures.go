package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/workload"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// The figures of build, incremental update, lookup, scan and verify, each
// measured beside its baseline in the same run.

var (
	appendTable = benchTableSpec{name: "append"}
	cdcTable    = benchTableSpec{name: "cdc", upserts: benchUpsertCommits}
)

var buildRate = regexp.MustCompile(`\(([0-9]+) rows/s\)`)

// childBuild rebuilds the pk index of the table in dir as a child process.
func (b *bench) childBuild(ctx context.Context, dir string) (childRun, float64, error) {
	r, err := b.child(ctx, dir, "build", "--table", benchTable, "--index", "pk")
	if err != nil {
		return r, 0, err
	}
	m := buildRate.FindStringSubmatch(r.stdout)
	if m == nil {
		return r, 0, fmt.Errorf("build printed no rate: %q", r.stdout)
	}
	rate, _ := strconv.ParseFloat(m[1], 64)
	return r, rate, nil
}

// benchBuild: a full build of pk on the CDC table (after its upsert
// commits) and on the append-only table of the same orders, each a child
// process whose peak RSS is its own.
func benchBuild(ctx context.Context, b *bench) error {
	cfg, err := b.g.config()
	if err != nil {
		return err
	}
	type built struct {
		run  childRun
		rate float64
	}
	res := map[string]built{}
	for _, spec := range []benchTableSpec{appendTable, cdcTable} {
		dir, err := b.freshTable(ctx, spec)
		if err != nil {
			return err
		}
		b.note("build: pk on the %s table (%d orders), as a child process", spec.name, b.rows)
		r, rate, err := b.childBuild(ctx, dir)
		if err != nil {
			return err
		}
		res[spec.name] = built{r, rate}
		b.note("build: %s table: %.0f rows/s, peak RSS %.0f MiB, %.2f cores", spec.name, rate, mib(r.maxRSS), r.cpu.Seconds()/r.wall.Seconds())
	}
	b.cdcBuild = ptr(res["cdc"].run)
	budget := mib(int64(cfg.Build.MemoryBudget))
	rssGoal := budget * 1.25
	for _, name := range []string{"cdc", "append"} {
		r := res[name]
		f := figure{Name: "build." + name + ".rows_per_s", Value: r.rate, Unit: "rows/s", Goal: ">= 1000000", Met: ptr(r.rate >= 1e6)}
		m := figure{Name: "build." + name + ".peak_rss", Value: mib(r.run.maxRSS), Unit: "MiB",
			Goal: fmt.Sprintf("<= %.0f (memory budget + 25%%)", rssGoal), Met: ptr(mib(r.run.maxRSS) <= rssGoal)}
		if name == "cdc" {
			f.Name = fmt.Sprintf("build.cdc-%d-upserts.rows_per_s", benchUpsertCommits)
			m.Name = fmt.Sprintf("build.cdc-%d-upserts.peak_rss", benchUpsertCommits)
			f.Baseline, f.BaselineValue = "append-only", ptr(res["append"].rate)
			m.Baseline, m.BaselineValue = "append-only", ptr(mib(res["append"].run.maxRSS))
		}
		b.add(f)
		b.add(m)
		cores := r.run.cpu.Seconds() / r.run.wall.Seconds()
		b.add(figure{Name: strings.TrimSuffix(f.Name, ".rows_per_s") + ".cores_busy", Value: cores, Unit: "cores", Goal: ">= 1.8 (both cores)",
			Met: ptr(cores >= 1.8)})
	}
	return nil
}

// benchIncremental: one upsert commit of 0.1% of the orders at the key
// tail, then one spread uniformly, each published by the updater as an
// incremental update of pk, beside the full build of the same index, all
// with the configured range file rule (by default 4 MiB or 131072 entries,
// whichever a file reaches first).
func benchIncremental(ctx context.Context, b *bench) error {
	_, e, id, tbl, err := b.openFreshTable(ctx, appendTable)
	if err != nil {
		return err
	}
	defer e.Close()
	rw := compactor.ConfiguredRangeWriter(e.cfg.Build, e.store)
	b.note("incremental: full build of pk with range files of %s or %d entries, row groups of %d (the baseline)", humanBytes(rw.TargetFileSize),
		rw.TargetFileEntries, rw.RowGroupRows)
	rebuild, err := b.buildInProcess(ctx, e, tbl, id, "pk", rw)
	if err != nil {
		return err
	}
	stageDir := filepath.Join(b.dir, "work", "stage")
	if err := os.RemoveAll(stageDir); err != nil {
		return err
	}
	store, err := staging.OpenStore(stageDir, staging.StoreOptions{Logger: b.log})
	if err != nil {
		return err
	}
	defer store.Close()
	u := updater.New(e.cat, e.indexes, store, id, "pk", updater.Options{Range: rw, MemoryBudget: int64(e.cfg.Build.MemoryBudget),
		SpillDir: e.cfg.Build.SpillDir, Logger: b.log})
	keys := max(b.rows/1000, 1)
	b.add(figure{Name: "incremental.rebuild.time", Value: rebuild.Seconds(), Unit: "s"})
	b.add(figure{Name: "incremental.rebuild.entries_per_s", Value: float64(b.rows) / rebuild.Seconds(), Unit: "entries/s"})
	for i, pattern := range []string{"tail", "uniform"} {
		ids, err := workload.UpsertIDs(b.rows, keys, pattern, uint64(100+i))
		if err != nil {
			return err
		}
		if tbl, err = workload.Upsert(ctx, tbl, ids, 100+i, uint64(100+i)); err != nil {
			return err
		}
		b.note("incremental: %d upserts (%s) committed; updating pk", len(ids), pattern)
		st, err := u.Step(ctx, nil)
		if err != nil {
			return fmt.Errorf("update pk after the %s upserts: %w", pattern, err)
		}
		p := st.Published
		if p == nil || p.FullBuild || !st.Aligned {
			return fmt.Errorf("update pk after the %s upserts: no incremental index snapshot (%+v)", pattern, st)
		}
		b.note("incremental: %s: %s (delta staged %s, merged %s, published %s), %d entries rewritten, %d copied in %d row groups, range files %d rewritten / %d reused",
			pattern, p.Took.Round(time.Millisecond), p.Staged.Round(time.Millisecond), p.Merged.Round(time.Millisecond),
			p.Published.Round(time.Millisecond), p.EntriesRewritten, p.EntriesCopied, p.RowGroupsCopied, p.FilesRewritten, p.FilesReused)
		name := "incremental." + pattern + "-0.1pct."
		t := figure{Name: name + "time", Value: p.Took.Seconds(), Unit: "s", Baseline: "full rebuild", BaselineValue: ptr(rebuild.Seconds())}
		rate := float64(p.EntriesRewritten) / p.Took.Seconds()
		r := figure{Name: name + "entries_per_s", Value: rate, Unit: "entries/s"}
		if pattern == "tail" {
			t.Goal, t.Met = "ratio <= 0.02", ptr(p.Took.Seconds() <= 0.02*rebuild.Seconds())
		} else {
			r.Goal, r.Met = ">= 2000000", ptr(rate >= 2e6)
		}
		b.add(t)
		b.add(r)
		b.add(figure{Name: name + "files_rewritten", Value: float64(p.FilesRewritten), Unit: "files",
			Baseline: "range files reused", BaselineValue: ptr(float64(p.FilesReused))})
		if pattern == "tail" {
			if err := b.tailSeries(ctx, u, &tbl, keys, rebuild); err != nil {
				return err
			}
		}
	}
	return nil
}

// tailSeries commits tail upserts one after another and updates pk after
// each with the updater that made the first tail update, as a running
// daemon would: the median and the p99 of their times (the goal's p99), the
// first update of a process and of its staging store (the `time` figure)
// apart.
func (b *bench) tailSeries(ctx context.Context, u *updater.Updater, tbl **table.Table, keys int64, rebuild time.Duration) error {
	const steps = 15
	took := make([]time.Duration, 0, steps)
	var staged, merged []time.Duration
	for i := range steps {
		ids, err := workload.UpsertIDs(b.rows, keys, "tail", uint64(200+i))
		if err != nil {
			return err
		}
		if *tbl, err = workload.Upsert(ctx, *tbl, ids, 200+i, uint64(200+i)); err != nil {
			return err
		}
		st, err := u.Step(ctx, nil)
		if err != nil {
			return fmt.Errorf("update pk after tail upserts %d of %d: %w", i+1, steps, err)
		}
		if p := st.Published; p == nil || p.FullBuild || !st.Aligned {
			return fmt.Errorf("update pk after tail upserts %d of %d: no incremental index snapshot (%+v)", i+1, steps, st)
		}
		took = append(took, st.Published.Took)
		staged, merged = append(staged, st.Published.Staged), append(merged, st.Published.Merged)
	}
	slices.Sort(took)
	slices.Sort(staged)
	slices.Sort(merged)
	p50, p99 := took[len(took)/2], took[len(took)-1] // of 15, the p99 is the largest
	b.note("incremental: %d more tail updates, one after each commit: p50 %s (delta staged p50 %s, merged p50 %s), p99 %s (%v)", steps,
		p50.Round(time.Millisecond), staged[steps/2].Round(time.Millisecond), merged[steps/2].Round(time.Millisecond), p99.Round(time.Millisecond), took)
	b.add(figure{Name: "incremental.tail-0.1pct.p50", Value: p50.Seconds(), Unit: "s", Baseline: "full rebuild", BaselineValue: ptr(rebuild.Seconds())})
	b.add(figure{Name: "incremental.tail-0.1pct.p99", Value: p99.Seconds(), Unit: "s", Baseline: "full rebuild", BaselineValue: ptr(rebuild.Seconds()),
		Goal: "< 1 s", Met: ptr(p99 < time.Second)})
	return nil
}

// benchLookup: a one-key lookup through pk in process and as a whole
// `streamidx lookup` process, and an IN of 10,000 random keys, each beside
// iceberg-go's filtered scan of the same table (in process, or the
// `scan-table --key` process).
func benchLookup(ctx context.Context, b *bench) error {
	dir, e, id, tbl, err := b.openFreshTable(ctx, appendTable)
	if err != nil {
		return err
	}
	defer e.Close()
	md, _, err := e.indexes.Load(ctx, id, "pk")
	if err != nil {
		return err
	}
	// A warm process keeps what lookups read in the lookup cache, as
	// `run --serve` and `serve` do (serve.cache-bytes); the uncached figure
	// is a process that configures none and reads every range file footer,
	// page index and page it needs.
	warm, err := b.openEnvAt(ctx, dir, true)
	if err != nil {
		return err
	}
	defer warm.Close()
	p, pw := planner.New(planner.Options{Store: e.store}), planner.New(planner.Options{Store: warm.store})
	rng := rand.New(rand.NewPCG(7, 7))
	lookupWith := func(p *planner.Planner, where string, want int64) (time.Duration, error) {
		began := time.Now()
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, planner.Query{Where: where})
		if err != nil {
			return 0, err
		}
		took := time.Since(began)
		n := res.NumRows()
		res.Release()
		if n != want {
			return 0, fmt.Errorf("lookup %.40s: %d rows, want %d", where, n, want)
		}
		return took, nil
	}
	lookup := func(where string, want int64) (time.Duration, error) { return lookupWith(p, where, want) }
	scan := func(filter iceberg.BooleanExpression, want int64) (time.Duration, error) {
		began := time.Now()
		_, recs, err := tbl.Scan(table.WithRowFilter(filter)).ToArrowRecords(ctx)
		if err != nil {
			return 0, err
		}
		var n int64
		for rec, err := range recs {
			if err != nil {
				return 0, err
			}
			n += rec.NumRows()
			rec.Release()
		}
		if n != want {
			return 0, fmt.Errorf("filtered scan: %d rows, want %d", n, want)
		}
		return time.Since(began), nil
	}
	if b.want("lookup.point") {
		// The first lookup reads the tracking file, which a process keeps.
		if _, err := lookup("order_id = 0", 1); err != nil {
			return err
		}
		const lookups, scans = 50, 5
		var index, scanned time.Duration
		for range lookups {
			t, err := lookup(fmt.Sprintf("order_id = %d", rng.Int64N(b.rows)), 1)
			if err != nil {
				return err
			}
			index += t
		}
		for range scans {
			t, err := scan(iceberg.EqualTo(iceberg.Reference("order_id"), rng.Int64N(b.rows)), 1)
			if err != nil {
				return err
			}
			scanned += t
		}
		// The warm process: lookups of random keys until the cache holds
		// what they read (or its budget is spent), then the measured ones.
		const warmup, measured = 2000, 1000
		var warmed time.Duration
		for i := range warmup + measured {
			t, err := lookupWith(pw, fmt.Sprintf("order_id = %d", rng.Int64N(b.rows)), 1)
			if err != nil {
				return err
			}
			if i >= warmup {
				warmed += t
			}
		}
		cs := warm.store.CacheStats().Lookup
		ix, wx, sc := ms(index)/lookups, ms(warmed)/measured, ms(scanned)/scans
		b.note("lookup: one key in a warm process %.3f ms (mean of %d after %d; lookup cache %.0f MiB, %d hits, %d misses), "+
			"without a cache %.3f ms (mean of %d), filtered scan %.1f ms (mean of %d)",
			wx, measured, warmup, mib(cs.Bytes), cs.Hits, cs.Misses, ix, lookups, sc, scans)
		b.add(figure{Name: "lookup.point.in_process", Value: wx, Unit: "ms", Baseline: "iceberg-go filtered scan", BaselineValue: &sc,
			Goal: "ratio <= 0.005 (200x faster)", Met: ptr(wx <= sc*0.005)})
		b.add(figure{Name: "lookup.point.in_process_uncached", Value: ix, Unit: "ms", Baseline: "iceberg-go filtered scan", BaselineValue: &sc})

		front, err := frontBinary()
		if err != nil {
			return err
		}
		// The three in turn, each once per key, and the median of each: a
		// pause of the machine falls on all of them alike, and on one run
		// of each rather than on the figure.
		const procs = 9
		var fronts, engines, scanProcs []float64
		for range procs {
			key := rng.Int64N(b.rows)
			took, err := frontLookup(ctx, front, childArgs(b, dir), dir, key)
			if err != nil {
				return err
			}
			fronts = append(fronts, ms(took))
			r, err := b.child(ctx, dir, "lookup", "--table", benchTable, "--index", "pk", "--where", fmt.Sprintf("order_id = %d", key))
			if err != nil {
				return err
			}
			engines = append(engines, ms(r.wall))
			if r, err = b.child(ctx, dir, "scan-table", "--table", benchTable, "--key", fmt.Sprintf("order_id=%d", key)); err != nil {
				return err
			}
			if !strings.Contains(r.stdout, "scanned 1 rows") {
				return fmt.Errorf("scan-table --key found other than one row: %s", r.stdout)
			}
			scanProcs = append(scanProcs, ms(r.wall))
		}
		pv, pe, ps := percentile(fronts, 0.5), percentile(engines, 0.5), percentile(scanProcs, 0.5)
		b.note("lookup: one key as a streamidx lookup process %.1f ms (%.1f-%.1f), as a streamidx-engine lookup process %.1f ms (%.1f-%.1f), "+
			"scan-table process %.1f ms (%.1f-%.1f) (medians of %d, min-max)", pv, slices.Min(fronts), slices.Max(fronts),
			pe, slices.Min(engines), slices.Max(engines), ps, slices.Min(scanProcs), slices.Max(scanProcs), procs)
		b.add(figure{Name: "lookup.point.process", Value: pv, Unit: "ms", Baseline: "scan-table --key process", BaselineValue: &ps,
			Goal: "< 30 ms", Met: ptr(pv < 30)})
		b.add(figure{Name: "lookup.point.engine_process", Value: pe, Unit: "ms", Baseline: "scan-table --key process", BaselineValue: &ps})
		if b.want("lookup.point.client_process") {
			if err := b.clientProcesses(ctx, dir, rng, pv); err != nil {
				return err
			}
		}
	}
	if b.want("lookup.in10k") {
		n := min(10_000, b.rows)
		keys := make([]int64, n)
		list := make([]string, n)
		for i, k := range rng.Perm(int(b.rows))[:n] {
			keys[i], list[i] = int64(k), strconv.Itoa(k)
		}
		where := "order_id IN (" + strings.Join(list, ", ") + ")"
		// Each way three times in turn, and the pair whose ratio is the
		// median: one run of either swings with what the process and the
		// page cache hold, and a pause of the machine falls on one pair.
		const runs = 3
		type pair struct{ ix, sc time.Duration }
		var pairs []pair
		for range runs {
			ix, err := lookup(where, n)
			if err != nil {
				return err
			}
			sc, err := scan(iceberg.IsIn(iceberg.Reference("order_id"), keys...), n)
			if err != nil {
				return err
			}
			pairs = append(pairs, pair{ix, sc})
		}
		b.note("lookup: IN of %d keys through pk and by filtered scan, in turn: %v", n, pairs)
		slices.SortFunc(pairs, func(a, c pair) int { return cmp.Compare(a.ix.Seconds()/a.sc.Seconds(), c.ix.Seconds()/c.sc.Seconds()) })
		ix, sc := pairs[runs/2].ix, pairs[runs/2].sc
		b.note("lookup: IN of %d keys: the median pair %s and %s", n, ix.Round(time.Millisecond), sc.Round(time.Millisecond))
		b.add(figure{Name: "lookup.in10k.in_process", Value: ms(ix), Unit: "ms", Baseline: "iceberg-go filtered scan", BaselineValue: ptr(ms(sc)),
			Goal: "ratio <= 0.2 (5x faster)", Met: ptr(ix.Seconds() <= 0.2*sc.Seconds())})
	}
	return nil
}

// clientProcesses: one-key lookups as whole `streamidx-client lookup`
// processes, through a `streamidx serve` child on dir's catalogs, beside
// the mean of the whole `streamidx lookup` processes (baseline, in ms).
func (b *bench) clientProcesses(ctx context.Context, dir string, rng *rand.Rand, baseline float64) error {
	cl, err := clientBinary()
	if err != nil {
		b.note("lookup: %v: lookup.point.client_process is left out", err)
		return nil
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv, err := b.startChild(ctx, dir, "serve", "--http", addr)
	if err != nil {
		return err
	}
	defer srv.stop()
	base := "http://" + addr
	if err := waitReady(ctx, base, srv, time.Minute); err != nil {
		return err
	}
	// The first lookup of the service reads the tracking file, which it
	// keeps: it is left out, as the in-process figures leave it out.
	const procs = 20
	var total time.Duration
	for i := range procs + 1 {
		began := time.Now()
		if err := clientLookup(ctx, cl, base, dir, rng.Int64N(b.rows)); err != nil {
			return err
		}
		took := time.Since(began)
		if i > 0 {
			total += took
		}
	}
	cv := ms(total) / procs
	b.note("lookup: one key as a streamidx-client process through streamidx serve %.1f ms (mean of %d), streamidx lookup process %.1f ms", cv, procs, baseline)
	b.add(figure{Name: "lookup.point.client_process", Value: cv, Unit: "ms", Baseline: "streamidx lookup process", BaselineValue: &baseline,
		Goal: "< 30 ms", Met: ptr(cv < 30)})
	return srv.stop()
}

// frontLookup looks one order up as a whole `streamidx lookup` process
// with the global flags base, which must find it, and returns its wall
// time. (Not a b.child: a child asked for its peak memory runs in
// streamidx-engine.)
func frontLookup(ctx context.Context, front string, base []string, dir string, key int64) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, front, append(base, "lookup", "--table", benchTable, "--index", "pk", "--where", fmt.Sprintf("order_id = %d", key), "--json")...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	if err != nil {
		return took, fmt.Errorf("streamidx lookup of order %d: %w: %s", key, err, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		return took, fmt.Errorf("streamidx lookup of order %d: %d rows, want 1: %s", key, n, stdout.String())
	}
	return took, nil
}

// clientLookup looks one order up as a whole streamidx-client process
// through the service at base, which must find it.
func clientLookup(ctx context.Context, cl, base, dir string, key int64) error {
	cmd := exec.CommandContext(ctx, cl, "lookup", "--server", base, "--table", benchTable, "--index", "pk", "--where", fmt.Sprintf("order_id = %d", key))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("streamidx-client lookup of order %d: %w: %s", key, err, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		return fmt.Errorf("streamidx-client lookup of order %d: %d rows, want 1: %s", key, n, stdout.String())
	}
	return nil
}

// The programs the bench measures besides this one, when not the ones
// beside this executable: the streamidx-client, and the streamidx that
// answers a lookup of a current index itself.
const (
	clientBinaryEnv = "STREAMIDX_CLIENT_BINARY"
	frontBinaryEnv  = "STREAMIDX_BINARY"
)

// clientBinary is the streamidx-client the bench measures.
func clientBinary() (string, error) { return sibling("streamidx-client", clientBinaryEnv) }

// frontBinary is the streamidx the bench measures whole lookups of.
func frontBinary() (string, error) { return sibling("streamidx", frontBinaryEnv) }

// sibling is program name as $env names it, or the one beside this
// executable, where make build builds it.
func sibling(name, env string) (string, error) {
	p := os.Getenv(env)
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		p = filepath.Join(filepath.Dir(exe), name)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not there (make build builds it beside streamidx-engine; %s names another)", p, env)
	}
	return p, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchScan: iceberg-go's full scan of the CDC table in three states of one
// table, each scan a child process: its snapshot with the equality deletes,
// the snapshot rewrite-deletes committed (deletion vectors), and that
// snapshot compacted (iceberg-go's RewriteDataFiles, which applies the
// deletion vectors and removes them with their files). The three are scanned
// in turn, the order turning each round, and each figure is the best of its
// rounds, so a pause of the machine weighs on no state alone. The time of
// rewrite-deletes is set beside a compaction of the original table, measured
// on a fresh copy of it.
func benchScan(ctx context.Context, b *bench) error {
	dir, err := b.freshTable(ctx, cdcTable)
	if err != nil {
		return err
	}
	b.note("scan: compact-table of the original table (iceberg-go RewriteDataFiles), the baseline of rewrite-deletes' time")
	compact, err := b.child(ctx, dir, "compact-table", "--table", benchTable)
	if err != nil {
		return err
	}
	if dir, err = b.freshTable(ctx, cdcTable); err != nil {
		return err
	}
	b.note("scan: rewrite-deletes through pk")
	rewrite, err := b.child(ctx, dir, "rewrite-deletes", "--table", benchTable, "--index", "pk", "--json")
	if err != nil {
		return err
	}
	var res struct {
		Planned   int64 `json:"snapshot-id"`
		Committed int64 `json:"committed-snapshot-id"`
	}
	if err := json.Unmarshal([]byte(rewrite.stdout), &res); err != nil || res.Committed == 0 {
		return fmt.Errorf("rewrite-deletes committed nothing (%v): %s", err, strings.TrimSpace(rewrite.stdout))
	}
	b.note("scan: compact-table of the rewritten snapshot")
	if _, err := b.child(ctx, dir, "compact-table", "--table", benchTable); err != nil {
		return err
	}
	states := []struct {
		what     string
		snapshot []string
		best     float64
	}{
		{what: fmt.Sprintf("with %d equality delete files", benchUpsertCommits), snapshot: []string{"--snapshot", strconv.FormatInt(res.Planned, 10)}},
		{what: "after rewrite-deletes", snapshot: []string{"--snapshot", strconv.FormatInt(res.Committed, 10)}},
		{what: "after compaction"},
	}
	const rounds = 3
	for round := range rounds {
		for i := range states {
			s := &states[(i+round)%len(states)]
			r, err := b.child(ctx, dir, append([]string{"scan-table", "--table", benchTable}, s.snapshot...)...)
			if err != nil {
				return err
			}
			if !strings.Contains(r.stdout, fmt.Sprintf("scanned %d rows", b.rows)) {
				return fmt.Errorf("scan %s: %s, want %d rows", s.what, strings.TrimSpace(r.stdout), b.rows)
			}
			if s.best == 0 || r.wall.Seconds() < s.best {
				s.best = r.wall.Seconds()
			}
		}
	}
	for _, s := range states {
		b.note("scan: %s: %.2f s (best of %d)", s.what, s.best, rounds)
	}
	withDeletes, afterRewrite, compacted := states[0].best, states[1].best, states[2].best
	b.add(figure{Name: "scan.equality_deletes", Value: withDeletes, Unit: "s", Baseline: "after compaction", BaselineValue: &compacted})
	b.add(figure{Name: "scan.after_rewrite_deletes", Value: afterRewrite, Unit: "s", Baseline: "after compaction", BaselineValue: &compacted,
		Goal: "ratio <= 1.2", Met: ptr(afterRewrite <= 1.2*compacted)})
	b.add(figure{Name: "scan.rewrite_deletes_time", Value: rewrite.wall.Seconds(), Unit: "s", Baseline: "compaction", BaselineValue: ptr(compact.wall.Seconds())})
	return nil
}

// benchVerify: `streamidx verify` of pk on the CDC table beside the build
// of the same index, both child processes.
func benchVerify(ctx context.Context, b *bench) error {
	dir, err := b.freshTable(ctx, cdcTable)
	if err != nil {
		return err
	}
	build := b.cdcBuild
	if build == nil {
		b.note("verify: the build of pk on the cdc table first (the baseline)")
		r, _, err := b.childBuild(ctx, dir)
		if err != nil {
			return err
		}
		build = &r
	}
	b.note("verify: pk on the cdc table (%d entries), as a child process", b.rows)
	r, err := b.child(ctx, dir, "verify", "--table", benchTable, "--index", "pk")
	if err != nil {
		return err
	}
	b.note("verify: %s, peak RSS %.0f MiB", r.wall.Round(time.Millisecond), mib(r.maxRSS))
	b.add(figure{Name: "verify.time", Value: r.wall.Seconds(), Unit: "s", Baseline: "build", BaselineValue: ptr(build.wall.Seconds()),
		Goal: "ratio <= 2", Met: ptr(r.wall <= 2*build.wall)})
	b.add(figure{Name: "verify.peak_rss", Value: mib(r.maxRSS), Unit: "MiB", Baseline: "build", BaselineValue: ptr(mib(build.maxRSS)),
		Goal: "<= 1024", Met: ptr(mib(r.maxRSS) <= 1024)})
	return nil
}

// openFreshTable copies a pristine table of spec into place and opens it:
// its directory, the environment (to close), its identifier and the table.
func (b *bench) openFreshTable(ctx context.Context, spec benchTableSpec) (string, *env, table.Identifier, *table.Table, error) {
	dir, err := b.freshTable(ctx, spec)
	if err != nil {
		return "", nil, nil, nil, err
	}
	e, err := b.openEnvAt(ctx, dir, false)
	if err != nil {
		return "", nil, nil, nil, err
	}
	id, _ := config.ParseTable(benchTable)
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		e.Close()
		return "", nil, nil, nil, err
	}
	return dir, e, id, tbl, nil
}
