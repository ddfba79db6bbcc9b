package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/internal/workload"
	"github.com/streamidx/streamidx/updater"
)

// The freshness figures: a table of orders with the demo's pk and
// by_customer indexes, kept by the daemon in-process, reading commit
// notifications from an in-process Kafka broker, while a stream commits
// upserts (equality deletes and new versions) at a fixed rate. For each
// index: the lag from every source commit to the first index snapshot that
// covers it, its trend, and what each index snapshot rewrote.

const (
	benchTable       = "bench.orders"
	benchCommitTopic = "streamidx-commits"
)

// freshScenario is one stream and one daemon configuration.
type freshScenario struct {
	name    string
	upserts int64
	pattern string
	policy  string
	indexes []string
	// alone names the scenario whose pk figures are measured without
	// by_customer beside it (or without rewrites); "" when there is none.
	alone string
	// rewrite turns on run.rewrite-deletes: the daemon turns the stream's
	// equality deletes into deletion vectors through pk as it goes.
	rewrite bool
}

func freshScenarios() []freshScenario {
	var out []freshScenario
	for _, n := range []int64{1000, 10000} {
		for _, pattern := range []string{"tail", "uniform"} {
			stream := fmt.Sprintf("freshness.%s-%d", pattern, n)
			alone := ""
			if pattern == "tail" {
				alone = stream + ".every-pk-alone"
				out = append(out, freshScenario{name: alone, upserts: n, pattern: pattern, policy: "every", indexes: []string{"pk"}})
			}
			for _, policy := range []string{"every", "latest", "adaptive"} {
				sc := freshScenario{name: stream + "." + policy, upserts: n, pattern: pattern, policy: policy, indexes: []string{"pk", "by_customer"}}
				if policy == "every" {
					sc.alone = alone
				}
				out = append(out, sc)
			}
			if n == 10000 {
				// Uniform upserts make every update of pk rewrite all of
				// it; at 10M, under policy every, pk falls behind, and a
				// rewrite planned on a snapshot older than the previous
				// rewrite's waits for pk to pass it. So the uniform stream
				// runs under adaptive, beside pk alone under adaptive.
				policy := "every"
				if pattern == "uniform" {
					policy = "adaptive"
					alone = stream + ".adaptive-pk-alone"
					out = append(out, freshScenario{name: alone, upserts: n, pattern: pattern, policy: policy, indexes: []string{"pk"}})
				}
				out = append(out, freshScenario{name: stream + "." + policy + "-rewrite", upserts: n, pattern: pattern, policy: policy,
					indexes: []string{"pk"}, alone: alone, rewrite: true})
			}
		}
	}
	return out
}

// freshResult is what one scenario measured for one index.
type freshResult struct {
	lags      []float64 // seconds, by source commit; uncovered ones up to the end
	times     []float64 // seconds from the first commit, by source commit
	uncovered int
	published int
	entries   float64 // written, per index snapshot
	bytes     float64
	paused    float64 // seconds waited for shorter updates, per index snapshot
	verified  int
	exact     int
	// rewrite is what the daemon's rewrites through this index did.
	rewrite *rewriteResult
}

// rewriteResult is what the daemon's rewrites of equality deletes did in
// one scenario.
type rewriteResult struct {
	commits, positions float64
	// left are the equality delete rows still live in the table's
	// snapshot after the drain (its summary's total-equality-deletes).
	left float64
}

func benchFreshness(ctx context.Context, b *bench) error {
	var chosen []freshScenario
	for _, sc := range freshScenarios() {
		if b.want(sc.name) {
			chosen = append(chosen, sc)
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	// A baseline runs when the scenario that compares with it does.
	for _, sc := range freshScenarios() {
		if sc.alone != "" && slices.ContainsFunc(chosen, func(t freshScenario) bool { return t.name == sc.name }) &&
			!slices.ContainsFunc(chosen, func(t freshScenario) bool { return t.name == sc.alone }) {
			i := slices.IndexFunc(freshScenarios(), func(t freshScenario) bool { return t.name == sc.alone })
			chosen = append([]freshScenario{freshScenarios()[i]}, chosen...)
		}
	}
	if err := b.prepareTable(ctx); err != nil {
		return err
	}
	alone := map[string]*freshResult{}
	for i, sc := range chosen {
		b.note("scenario %d/%d %s: %d upserts per commit (%s), policy %s, indexes %s", i+1, len(chosen), sc.name, sc.upserts,
			sc.pattern, sc.policy, strings.Join(sc.indexes, ", "))
		res, load, commits, rate, err := b.runScenario(ctx, sc)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		b.add(figure{Name: sc.name + ".commits", Value: float64(commits), Unit: "commits"})
		b.add(figure{Name: sc.name + ".commit_rate", Value: rate, Unit: "commits/s", Goal: fmt.Sprintf(">= %.2f", 0.9/b.interval.Seconds()),
			Met: ptr(rate >= 0.9/b.interval.Seconds())})
		b.add(figure{Name: sc.name + ".load_avg", Value: load, Unit: "runnable"})
		for _, index := range sc.indexes {
			r := res[index]
			if strings.HasSuffix(sc.name, "-pk-alone") {
				alone[sc.name] = r
			}
			b.indexFigures(sc, index, r, alone[sc.alone])
			if rw := r.rewrite; rw != nil {
				p := sc.name + "." + index + "."
				b.add(figure{Name: p + "rewrites", Value: rw.commits, Unit: "commits"})
				b.add(figure{Name: p + "rewrite_positions", Value: rw.positions, Unit: "positions"})
				b.add(figure{Name: p + "equality_deletes_left", Value: rw.left, Unit: "rows", Goal: "0 after the drain", Met: ptr(rw.left == 0)})
			}
		}
	}
	return nil
}

// indexFigures adds the figures of one index in one scenario.
func (b *bench) indexFigures(sc freshScenario, index string, r *freshResult, alone *freshResult) {
	p := sc.name + "." + index + "."
	p50, p99, worst := percentile(r.lags, 0.5), percentile(r.lags, 0.99), percentile(r.lags, 1)
	f99 := figure{Name: p + "lag_p99", Value: p99, Unit: "s"}
	if sc.pattern == "tail" && index == "pk" && !sc.rewrite {
		f99.Goal, f99.Met = "< 1 s", ptr(p99 < 1)
	}
	if alone != nil && index == "pk" {
		f99.Baseline, f99.BaselineValue = "pk alone", ptr(percentile(alone.lags, 0.99))
	}
	b.add(figure{Name: p + "lag_p50", Value: p50, Unit: "s"})
	b.add(f99)
	b.add(figure{Name: p + "lag_max", Value: worst, Unit: "s"})
	slope := figure{Name: p + "lag_growth", Value: slopeOf(r.times, r.lags), Unit: "s/s"}
	if sc.policy == "latest" {
		// Bounded lag: it does not keep rising over the stream. Commits left
		// uncovered count only until the end of the drain, which bends the
		// slope down: the lag is bounded only if every commit was covered.
		slope.Goal, slope.Met = "< 0.1, every commit covered", ptr(slope.Value < 0.1 && r.uncovered == 0)
	}
	b.add(slope)
	b.add(figure{Name: p + "uncovered", Value: float64(r.uncovered), Unit: "commits"})
	b.add(figure{Name: p + "index_snapshots", Value: float64(r.published), Unit: "snapshots"})
	b.add(figure{Name: p + "entries_rewritten", Value: r.entries, Unit: "entries/snapshot"})
	b.add(figure{Name: p + "bytes_written", Value: r.bytes, Unit: "bytes/snapshot"})
	if len(sc.indexes) > 1 {
		b.add(figure{Name: p + "paused", Value: r.paused, Unit: "s/snapshot"})
	}
	if alone != nil && index == "pk" && sc.rewrite {
		// What rewriting the deletes as they come costs pk's freshness.
		b.add(figure{Name: p + "lag_p99_vs_no_rewrite", Value: p99 / percentile(alone.lags, 0.99), Unit: "x"})
	} else if alone != nil && index == "pk" {
		pa := percentile(alone.lags, 0.99)
		ratio := p99 / pa
		b.add(figure{Name: p + "lag_p99_vs_alone", Value: ratio, Unit: "x", Goal: "<= 1.5 (by_customer does not slow pk)",
			Met: ptr(ratio <= 1.5)})
	}
	if b.verify != "none" {
		b.add(figure{Name: p + "exact", Value: float64(r.exact), Unit: "snapshots",
			Goal: fmt.Sprintf("%d of %d verified exact", r.verified, r.verified), Met: ptr(r.exact == r.verified)})
	}
}

// dataDir holds the catalog and warehouse the scenarios work on; pristine
// keeps the table and its built indexes as they were before any stream.
func (b *bench) dataDir() string     { return filepath.Join(b.dir, "data") }
func (b *bench) pristineDir() string { return filepath.Join(b.dir, "pristine") }

// openEnv opens the catalogs of the data directory, with the user's
// configuration otherwise.
func (b *bench) openEnv(ctx context.Context) (*env, error) {
	g := *b.g
	g.catalogURI = config.SQLiteURI(filepath.Join(b.dataDir(), "catalog.db"))
	g.warehouse = format.FileURI(filepath.Join(b.dataDir(), "warehouse"))
	e, err := openEnv(ctx, &g)
	if err != nil {
		return nil, err
	}
	e.log = b.log
	return e, nil
}

// prepareTable writes the orders table and builds its indexes, unless the
// pristine copy of an earlier run has the same size and range file rule.
func (b *bench) prepareTable(ctx context.Context) error {
	cfg, err := b.g.config()
	if err != nil {
		return err
	}
	marker := filepath.Join(b.pristineDir(), ".streamidx-bench")
	want := fmt.Sprintf("orders %d, %s\n", b.rows, rangeFileRule(cfg.Build))
	if got, err := os.ReadFile(marker); err == nil && string(got) == want {
		b.note("reusing the table and indexes in %s", b.pristineDir())
		return nil
	}
	for _, d := range []string{b.dataDir(), b.pristineDir()} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(b.dataDir(), 0o755); err != nil {
		return err
	}
	e, err := b.openEnv(ctx)
	if err != nil {
		return err
	}
	if err := b.writeTable(ctx, e); err != nil {
		e.Close()
		return err
	}
	e.Close()
	if err := os.CopyFS(b.pristineDir(), os.DirFS(b.dataDir())); err != nil {
		return fmt.Errorf("keep a pristine copy: %w", err)
	}
	return os.WriteFile(marker, []byte(want), 0o644)
}

func (b *bench) writeTable(ctx context.Context, e *env) error {
	id, err := config.ParseTable(benchTable)
	if err != nil {
		return err
	}
	tbl, err := workload.CreateOrders(ctx, e.cat, id, 2)
	if err != nil {
		return err
	}
	const appends = 4
	per := (b.rows + appends - 1) / appends
	began := time.Now()
	for from := int64(0); from < b.rows; from += per {
		if tbl, err = workload.Append(ctx, tbl, from, min(from+per, b.rows), 0, 1); err != nil {
			return err
		}
		b.note("wrote orders %d of %d (%s)", min(from+per, b.rows), b.rows, time.Since(began).Round(time.Second))
	}
	for _, name := range []string{"pk", "by_customer"} {
		if err := b.createIndex(ctx, e, tbl, id, name); err != nil {
			return err
		}
		md, _, err := e.indexes.Load(ctx, id, name)
		if err != nil {
			return err
		}
		began, last := time.Now(), time.Now()
		res, err := updater.BuildAndPublish(ctx, e.indexes, tbl, name, md, tbl.CurrentSnapshot(), updater.BuildOptions{
			Build: compactor.BuildOptions{
				RangeWriterOptions: compactor.ConfiguredRangeWriter(e.cfg.Build, e.store),
				MemoryBudget:       int64(e.cfg.Build.MemoryBudget), SpillDir: e.cfg.Build.SpillDir, Logger: b.log,
				Progress: func(p compactor.BuildProgress) {
					if time.Since(last) >= 10*time.Second {
						last = time.Now()
						b.note("building %s: %s, %d of %d rows scanned, %d entries written", name, p.Phase, p.RowsScanned, p.RowsExpected, p.RowsWritten)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		b.note("built %s: %d entries in %d range files (%s) in %s", name, res.Rows, len(res.Entries), humanBytes(res.Bytes),
			time.Since(began).Round(time.Second))
	}
	return nil
}

// restore puts the pristine table and indexes back in the data directory.
func (b *bench) restore() error {
	if err := os.RemoveAll(b.dataDir()); err != nil {
		return err
	}
	if err := os.CopyFS(b.dataDir(), os.DirFS(b.pristineDir())); err != nil {
		return fmt.Errorf("restore the pristine table: %w", err)
	}
	return os.Remove(filepath.Join(b.dataDir(), ".streamidx-bench"))
}

// runScenario streams sc's commits against the pristine table with the
// daemon keeping sc's indexes, and measures each index. It also returns the
// mean load average, the commits made and their rate.
func (b *bench) runScenario(ctx context.Context, sc freshScenario) (map[string]*freshResult, float64, int, float64, error) {
	if err := b.restore(); err != nil {
		return nil, 0, 0, 0, err
	}
	e, err := b.openEnv(ctx)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer e.Close()
	id, _ := config.ParseTable(benchTable)
	cluster, err := kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, benchCommitTopic))
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer producer.Close()

	cfg := e.cfg
	cfg.Run.Indexes = nil
	for _, index := range sc.indexes {
		cfg.Run.Indexes = append(cfg.Run.Indexes, config.IndexRef{Table: benchTable, Index: index})
	}
	cfg.Run.Policy, cfg.Run.HTTP = sc.policy, ""
	cfg.Run.RewriteDeletes.Enabled = sc.rewrite
	cfg.Run.StageDir = filepath.Join(b.dataDir(), "staging")
	cfg.Run.Kafka.Brokers, cfg.Run.Kafka.CommitTopic = cluster.ListenAddrs(), benchCommitTopic
	// Every index snapshot stays, to measure the lag of each commit.
	cfg.Run.RetainSnapshots, cfg.Run.MaxSnapshotAge = math.MaxInt32, 0
	_, reg, stop, err := runDaemonInProcess(ctx, e, cfg, b.log)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer stop()

	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	before := map[string]int{}
	for _, index := range sc.indexes {
		md, _, err := e.indexes.Load(ctx, id, index)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		before[index] = len(md.Snapshots)
	}
	var loads []float64
	sampleLoad := func() {
		var l float64
		if _, err := fmt.Sscan(loadAverage(), &l); err == nil {
			loads = append(loads, l)
		}
	}
	n := max(int(b.duration/b.interval), 1)
	began, lastNote := time.Now(), time.Now()
	sampleLoad()
	var reload func(context.Context) (*table.Table, error)
	if sc.rewrite {
		// The daemon's rewrites commit to the table too: each commit
		// starts from the table as it is, and one that lost is made again.
		reload = func(ctx context.Context) (*table.Table, error) { return e.cat.LoadTable(ctx, id) }
	}
	commits, err := workload.Stream(ctx, tbl, workload.StreamOptions{
		Rows: b.rows, Upserts: sc.upserts, Pattern: sc.pattern, Interval: b.interval, Commits: n, Seed: 1,
		Notify: workload.KafkaNotifier(producer, benchCommitTopic), Reload: reload,
		OnCommit: func(c workload.Commit) {
			if time.Since(lastNote) >= 15*time.Second {
				lastNote = time.Now()
				sampleLoad()
				b.note("%s: %d of %d commits; %s", sc.name, c.N, n, b.behind(ctx, e, id, sc.indexes, c.SnapshotID))
			}
		},
	})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	streamed := time.Since(began)
	if len(commits) == 0 {
		return nil, 0, 0, 0, errors.New("the stream made no commit")
	}
	last := commits[len(commits)-1].SnapshotID
	deadline := time.Now().Add(b.drain)
	for !b.covered(ctx, e, id, sc.indexes, last, sc.rewrite) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, 0, 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	end := time.Now()
	sampleLoad()
	if err := stop(); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("daemon: %w", err)
	}
	b.note("%s: %d commits in %s; after %s of draining %s", sc.name, len(commits), streamed.Round(time.Second),
		end.Sub(began.Add(streamed)).Round(time.Second), b.behind(ctx, e, id, sc.indexes, last))

	if tbl, err = e.cat.LoadTable(ctx, id); err != nil {
		return nil, 0, 0, 0, err
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, 0, 0, 0, err
	}
	out := map[string]*freshResult{}
	for _, index := range sc.indexes {
		md, _, err := e.indexes.Load(ctx, id, index)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		r := measureLags(commits, md.Snapshots[before[index]:], end, newestCommitOf(tbl, commits))
		if published := counterValue(families, "streamidx_flush_commits_total", index); published > 0 {
			r.entries = counterValue(families, "streamidx_compactor_written_entries_total", index) / published
			r.bytes = counterValue(families, "streamidx_compactor_written_bytes_total", index) / published
			r.paused = counterValue(families, "streamidx_updater_paused_seconds_total", index) / published
		}
		if err := b.verifySnapshots(ctx, e, tbl, md, md.Snapshots[before[index]:], r); err != nil {
			return nil, 0, 0, 0, err
		}
		if sc.rewrite {
			r.rewrite = &rewriteResult{commits: counterValue(families, "streamidx_rewrite_commits_total", index),
				positions: counterValue(families, "streamidx_rewrite_positions_total", index), left: equalityDeletesLeft(tbl)}
			b.note("%s: %.0f rewrites through %s turned %.0f positions into deletion vectors; %.0f equality delete rows left",
				sc.name, r.rewrite.commits, index, r.rewrite.positions, r.rewrite.left)
		}
		out[index] = r
	}
	var load float64
	for _, l := range loads {
		load += l / float64(len(loads))
	}
	return out, load, len(commits), float64(len(commits)) / streamed.Seconds(), nil
}

// newestCommitOf maps every snapshot of tbl to the position in commits of
// the newest of them it descends from (itself included): an index snapshot
// of a rewrite the daemon committed after commit i covers commits 0..i.
func newestCommitOf(tbl *table.Table, commits []workload.Commit) map[int64]int {
	pos := map[int64]int{}
	for i, c := range commits {
		pos[c.SnapshotID] = i
	}
	out := map[int64]int{}
	for _, s := range tbl.Metadata().Snapshots() {
		for _, a := range lineage.Ancestors(tbl, &s) {
			if i, ok := pos[a.SnapshotID]; ok {
				out[s.SnapshotID] = i
				break
			}
		}
	}
	return out
}

// measureLags finds, for every source commit, the first index snapshot
// that covers it (one for that commit or a later one: newest maps a source
// snapshot to the newest commit it descends from) and the lag between the
// two commits; a commit no index snapshot covers counts until end.
func measureLags(commits []workload.Commit, snaps []format.Snapshot, end time.Time, newest map[int64]int) *freshResult {
	r := &freshResult{published: len(snaps)}
	covered := make([]int64, len(commits)) // index commit time, ms; 0 while uncovered
	reach := -1
	for _, s := range snaps {
		i, ok := newest[s.SourceTableSnapshotID]
		if !ok || i <= reach {
			continue
		}
		for j := reach + 1; j <= i; j++ {
			covered[j] = s.TimestampMs
		}
		reach = i
	}
	start := commits[0].TimestampMs
	for i, c := range commits {
		at := covered[i]
		if at == 0 {
			r.uncovered++
			at = end.UnixMilli()
		}
		r.lags = append(r.lags, float64(at-c.TimestampMs)/1000)
		r.times = append(r.times, float64(c.TimestampMs-start)/1000)
	}
	return r
}

// verifySnapshots checks the index snapshots a stream produced with the
// independent verifier: the newest one, or every one with --verify all.
func (b *bench) verifySnapshots(ctx context.Context, e *env, tbl *table.Table, md *format.Metadata, snaps []format.Snapshot, r *freshResult) error {
	if b.verify == "none" || len(snaps) == 0 {
		return nil
	}
	if b.verify == "final" {
		snaps = snaps[len(snaps)-1:]
	}
	for i := range snaps {
		began := time.Now()
		rep, err := verify.Verify(ctx, tbl, md, &snaps[i], verify.Options{Store: e.store, MemoryBudget: int64(e.cfg.Build.MemoryBudget) / 2,
			SpillDir: e.cfg.Build.SpillDir, Logger: b.log})
		if err != nil {
			return fmt.Errorf("verify %s snapshot %d: %w", md.Location, snaps[i].SnapshotID, err)
		}
		r.verified++
		if rep.Exact() {
			r.exact++
		} else {
			b.note("NOT EXACT: index snapshot %d:\n%s", snaps[i].SnapshotID, rep.Summary())
		}
		b.note("verified index snapshot %d of %d of %s: exact %v (%s)", i+1, len(snaps), filepath.Base(md.Location), rep.Exact(),
			time.Since(began).Round(time.Second))
	}
	return nil
}

// behind describes how far each index is from source snapshot last.
func (b *bench) behind(ctx context.Context, e *env, id table.Identifier, indexes []string, last int64) string {
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, index := range indexes {
		md, _, err := e.indexes.Load(ctx, id, index)
		if err != nil {
			return err.Error()
		}
		behind := 0
		at := md.CurrentSnapshot().SourceTableSnapshotID
		if at != last && lineage.IsAncestor(tbl, at, last) {
			// Past last: a rewrite of the daemon's committed after it.
			parts = append(parts, fmt.Sprintf("%s 0 commits behind", index))
			continue
		}
		if head := tbl.SnapshotByID(last); head != nil {
			for n, s := range lineage.Ancestors(tbl, head) {
				if behind = n + 1; s.SnapshotID == at {
					behind = n
					break
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d commits behind", index, behind))
	}
	return strings.Join(parts, ", ")
}

// covered reports whether every index has an index snapshot for source
// snapshot last.
// With rewrites, the indexes must also cover the rewrites committed after
// last, and the table hold no equality delete left to rewrite.
func (b *bench) covered(ctx context.Context, e *env, id table.Identifier, indexes []string, last int64, rewrites bool) bool {
	if !rewrites {
		for _, index := range indexes {
			md, _, err := e.indexes.Load(ctx, id, index)
			if err != nil || md.CurrentSnapshot().SourceTableSnapshotID != last {
				return false
			}
		}
		return true
	}
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil || equalityDeletesLeft(tbl) != 0 {
		return false
	}
	for _, index := range indexes {
		md, _, err := e.indexes.Load(ctx, id, index)
		if err != nil || md.CurrentSnapshot().SourceTableSnapshotID != tbl.CurrentSnapshot().SnapshotID {
			return false
		}
	}
	return true
}

// equalityDeletesLeft is the number of equality delete rows live in tbl's
// current snapshot, by its summary (-1 when the summary does not say).
func equalityDeletesLeft(tbl *table.Table) float64 {
	snap := tbl.CurrentSnapshot()
	if snap == nil || snap.Summary == nil {
		return -1
	}
	n, err := strconv.ParseFloat(snap.Summary.Properties["total-equality-deletes"], 64)
	if err != nil {
		return -1
	}
	return n
}

// counterValue sums a counter of the daemon's registry over the series of
// one index.
func counterValue(families []*dto.MetricFamily, name, index string) float64 {
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "index" && l.GetValue() == index {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// percentile is the nearest-rank q-quantile of values (q = 1: the maximum).
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// slopeOf is the least-squares slope of y over x: how fast the lag grows
// over the stream.
func slopeOf(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
