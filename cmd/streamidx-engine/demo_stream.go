package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/internal/workload"
)

// The streaming demo: a CDC pipeline upserts orders about once a second,
// writing Debezium change events to a change topic and a commit
// notification per commit to the commit topic of an in-process Kafka
// broker, while the daemon, in-process too, keeps two indexes fresh and
// rewrites the equality deletes into deletion vectors.

const (
	demoTable       = "demo.orders"
	demoCommitTopic = "streamidx-commits"
	demoChangeTopic = "orders-cdc"
)

// demoStreamIndexes are the streaming demo's indexes in the order shown.
var demoStreamIndexes = []string{"pk", "by_customer"}

// demoStreamDefinitions: pk follows the table and stores row locations,
// which the rewrite of equality deletes needs; by_customer follows the
// change topic, so it stores no row location (an event does not say where
// its row lives).
var demoStreamDefinitions = map[string]string{
	"pk": demoDefinitions["pk"],
	"by_customer": `name: by_customer
source: events
identity: [customer_id, order_id]
materialized: [total_cents]
non-materialized: ["bucket(16, customer_id)"]
cluster: ["bucket(16, customer_id)", customer_id, order_id]
`,
}

// streamDemo is what the streaming demo was asked to do.
type streamDemo struct {
	dir      string
	rows     int64
	upserts  int64
	duration time.Duration
	http     string
	stdout   io.Writer
	// live redraws one screen in place (stdout is a terminal); otherwise
	// progress goes out as plain lines.
	live bool
}

// isTerminal reports whether w is a character device, where the demo may
// move the cursor.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// shellQuote quotes an argument that a shell would split.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\"$*?;&|<>()\\") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func runDemoStream(ctx context.Context, g *globals, sd streamDemo) (int, error) {
	if sd.rows < 1 || sd.upserts < 1 || sd.duration < time.Second {
		return exitError, fmt.Errorf("want --rows and --upserts of at least 1 and a --duration of at least 1s")
	}
	out := sd.stdout
	base := demoBase(g, sd.dir)
	step := func(title string, args ...string) error { return demoStep(ctx, g, out, base, title, args...) }
	if os.Getenv("STREAMIDX_BUILD_TARGET_FILE_SIZE") == "" {
		// Small range files, so that an update visibly rewrites only some.
		os.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "64KiB")
	}
	began := time.Now()
	if err := step("write a table of orders (Iceberg v3, embedded SQLite catalog, local warehouse)",
		"gen-table", "--table", demoTable, "--rows", fmt.Sprint(sd.rows), "--format-version", "3"); err != nil {
		return exitError, err
	}
	for _, name := range demoStreamIndexes {
		path := filepath.Join(sd.dir, name+".yaml")
		if err := os.WriteFile(path, []byte(demoStreamDefinitions[name]), 0o644); err != nil {
			return exitError, err
		}
		fmt.Fprintf(out, "\n-- %s\n%s", path, demoStreamDefinitions[name])
		if err := step("define index "+name, "create", "--table", demoTable, "--def", path); err != nil {
			return exitError, err
		}
	}
	if err := step("build pk (the daemon builds by_customer at the first commit notification, its starting point in the change topic)",
		"build", "--table", demoTable, "--index", "pk"); err != nil {
		return exitError, err
	}

	logPath := filepath.Join(sd.dir, "daemon.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return exitError, fmt.Errorf("create the daemon log: %w", err)
	}
	defer logFile.Close()
	dg := *g
	dg.catalogURI, dg.warehouse = config.SQLiteURI(filepath.Join(sd.dir, "catalog.db")), format.FileURI(filepath.Join(sd.dir, "warehouse"))
	e, err := openEnv(ctx, &dg)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	e.log = e.cfg.Log.Logger(logFile)
	id, err := config.ParseTable(demoTable)
	if err != nil {
		return exitError, err
	}
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		return exitError, err
	}

	cluster, err := kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, demoCommitTopic, demoChangeTopic))
	if err != nil {
		return exitError, fmt.Errorf("start the in-process Kafka broker: %w", err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		return exitError, err
	}
	defer producer.Close()
	pub := &cdcPublisher{client: producer, versions: map[int64]int{}, next: map[int32]int64{}}
	// The table's rows came before any change event: by_customer starts at
	// offset 0 of the change topic.
	if err := pub.notify(ctx, tbl, nil); err != nil {
		return exitError, fmt.Errorf("announce the table's snapshot: %w", err)
	}

	cfg := e.cfg
	cfg.Run.Indexes = nil
	for _, name := range demoStreamIndexes {
		cfg.Run.Indexes = append(cfg.Run.Indexes, config.IndexRef{Table: demoTable, Index: name})
	}
	cfg.Run.HTTP = sd.http
	cfg.Run.StageDir = filepath.Join(sd.dir, "staging")
	cfg.Run.Kafka.Brokers, cfg.Run.Kafka.CommitTopic = cluster.ListenAddrs(), demoCommitTopic
	cfg.Run.Kafka.ChangeTopics = []string{demoChangeTopic + "=" + demoTable}
	cfg.Run.RewriteDeletes.Enabled = true
	d, reg, stopDaemon, err := runDaemonInProcess(ctx, e, cfg, e.log)
	if err != nil {
		return exitError, fmt.Errorf("start the daemon: %w", err)
	}
	defer stopDaemon()
	metricsURL := "(off)"
	if a := d.Addr(); a != "" {
		metricsURL = "http://" + a + "/metrics"
	}

	n := max(int(sd.duration/time.Second), 1)
	fmt.Fprintf(out, "\n== the stream: up to %d upsert commits in %s, one a second, %d orders each (equality deletes + new versions), "+
		"with Debezium change events on %s and a commit notification on %s; the daemon keeps pk and by_customer fresh "+
		"and rewrites equality deletes into deletion vectors\n", n, sd.duration, sd.upserts, demoChangeTopic, demoCommitTopic)
	fmt.Fprintf(out, "metrics: %s (while the stream runs)\ndaemon log: %s\n", metricsURL, logPath)
	view := &demoView{sd: sd, e: e, id: id, reg: reg, metricsURL: metricsURL, logPath: logPath, planned: n,
		pos: map[int64]int{}, idx: map[string]*demoIndexView{}}
	for _, name := range demoStreamIndexes {
		view.idx[name] = &demoIndexView{}
	}
	viewCtx, stopView := context.WithCancel(ctx)
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		view.loop(viewCtx)
	}()
	streamStart := time.Now()
	view.setStart(streamStart)
	// The stream ends after --duration even when a busy machine makes
	// commits take longer than a second: ending the context between two
	// commits stops it without cutting one short.
	streamCtx, endStream := context.WithCancel(ctx)
	defer endStream()
	commits, err := workload.Stream(streamCtx, tbl, workload.StreamOptions{
		Rows: sd.rows, Upserts: sd.upserts, Pattern: "tail", Interval: time.Second, Commits: n, Seed: 1,
		Notify: func(ctx context.Context, tbl *table.Table, c workload.Commit) error { return pub.notify(ctx, tbl, &c) },
		Reload: func(ctx context.Context) (*table.Table, error) { return e.cat.LoadTable(ctx, id) },
		OnCommit: func(c workload.Commit) {
			view.addCommit(c)
			if time.Since(streamStart)+time.Second > sd.duration {
				endStream()
			}
		},
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		stopView()
		<-viewDone
		return exitError, err
	}
	if len(commits) == 0 {
		stopView()
		<-viewDone
		return exitError, errors.New("the stream made no commit")
	}
	view.setDraining()
	caught := view.waitCaughtUp(ctx, commits[len(commits)-1].SnapshotID, 2*time.Minute)
	stopView()
	<-viewDone
	view.mu.Lock()
	view.caught = caught
	view.mu.Unlock()
	view.refresh(ctx)
	view.draw(true)
	if err := stopDaemon(); err != nil {
		return exitError, fmt.Errorf("daemon: %w", err)
	}
	if !caught {
		fmt.Fprintf(out, "\nthe indexes did not catch up with the stream within 2 minutes (see %s); verifying where they are\n", logPath)
	}

	if tbl, err = e.cat.LoadTable(ctx, id); err != nil {
		return exitError, err
	}
	verdicts := make([]string, 0, len(demoStreamIndexes))
	failed := false
	for _, name := range demoStreamIndexes {
		fmt.Fprintf(out, "\n== verify %s against a full scan of the table\n$ streamidx verify --table %s --index %s\n", name, demoTable, name)
		verdict, ok, err := demoVerify(ctx, e, tbl, id, name, out)
		if err != nil {
			return exitError, err
		}
		failed = failed || !ok
		verdicts = append(verdicts, verdict)
	}

	last := commits[len(commits)-1]
	order := sd.rows - 1
	customer := workload.Order(order, last.Version, 1)[1].(int64)
	if err := step("look up an order the stream keeps changing, through the primary-key index", "lookup", "--table", demoTable,
		"--index", "pk", "--where", fmt.Sprintf("order_id = %d", order), "--explain"); err != nil {
		return exitError, err
	}
	if err := step("look up that order's customer through the bucketed secondary index",
		"lookup", "--table", demoTable, "--index", "by_customer", "--where", fmt.Sprintf("customer_id = %d", customer),
		"--limit", "5", "--explain"); err != nil {
		return exitError, err
	}

	var flags []string
	for _, b := range base {
		flags = append(flags, shellQuote(b))
	}
	common := strings.Join(flags, " ")
	fmt.Fprintf(out, "\ndemo finished in %s: %d commits streamed in %s; everything is in %s\n", time.Since(began).Round(time.Second),
		len(commits), view.streamed().Round(time.Second), sd.dir)
	sx, client := programPath("streamidx"), programPath("streamidx-client")
	fmt.Fprintf(out, "try:\n  %s list %s --table %s\n", sx, common, demoTable)
	fmt.Fprintf(out, "  %s inspect %s --table %s --index by_customer\n", sx, common, demoTable)
	fmt.Fprintf(out, "  %s lookup %s --table %s --index pk --where %s --explain\n", sx, common, demoTable,
		shellQuote(fmt.Sprintf("order_id = %d", order)))
	fmt.Fprintf(out, "  %s lookup %s --table %s --index by_customer --where %s --limit 5\n", sx, common, demoTable,
		shellQuote(fmt.Sprintf("customer_id = %d", customer)))
	fmt.Fprintf(out, "  %s serve %s &   # the lookup service, on 127.0.0.1:9465\n", sx, common)
	fmt.Fprintf(out, "  %s lookup --table %s --index pk --where %s --header\n\n", client, demoTable, shellQuote(fmt.Sprintf("order_id = %d", order)))
	for _, v := range verdicts {
		fmt.Fprintln(out, v)
	}
	if failed {
		return exitDifferent, nil
	}
	return exitOK, nil
}

// demoVerify judges index name's current snapshot against a full scan of
// its source snapshot and returns the verdict line.
func demoVerify(ctx context.Context, e *env, tbl *table.Table, id table.Identifier, name string, out io.Writer) (string, bool, error) {
	md, _, err := e.indexes.Load(ctx, id, name)
	if err != nil {
		return "", false, fmt.Errorf("load index %s: %w", name, err)
	}
	snap := md.CurrentSnapshot()
	if snap == nil {
		return fmt.Sprintf("verify FAILED for %s: the index has no snapshot", name), false, nil
	}
	rep, err := verify.Verify(ctx, tbl, md, snap, verify.Options{Store: e.store, MemoryBudget: int64(e.cfg.Build.MemoryBudget) / 2,
		SpillDir: e.cfg.Build.SpillDir, Logger: e.log})
	if err != nil {
		return "", false, fmt.Errorf("verify index %s: %w", name, err)
	}
	fmt.Fprint(out, rep.Summary())
	if !rep.Exact() {
		return fmt.Sprintf("verify FAILED for %s: index snapshot %d differs from source snapshot %d (see above)", name,
			rep.IndexSnapshotID, rep.SourceSnapshotID), false, nil
	}
	return fmt.Sprintf("verify passed for %s: exact, %d entries at source snapshot %d", name, rep.IndexEntries, rep.SourceSnapshotID), true, nil
}

// cdcPublisher plays the CDC pipeline's Kafka side: a Debezium update event
// per upserted order on the change topic, then the commit's notification
// naming the change-topic offsets it covers.
type cdcPublisher struct {
	client   *kgo.Client
	versions map[int64]int   // the version of each order the table holds, 0 when never upserted
	next     map[int32]int64 // per partition, the offset after the last event written
}

// notify publishes the events of c (none when c is nil) and the
// notification of tbl's current snapshot.
func (p *cdcPublisher) notify(ctx context.Context, tbl *table.Table, c *workload.Commit) error {
	if c != nil {
		recs := make([]*kgo.Record, 0, len(c.IDs))
		for _, id := range c.IDs {
			v, err := debeziumUpdate(workload.Order(id, p.versions[id], 1), workload.Order(id, c.Version, 1), c.TimestampMs)
			if err != nil {
				return err
			}
			recs = append(recs, &kgo.Record{Topic: demoChangeTopic, Key: fmt.Appendf(nil, `{"order_id":%d}`, id), Value: v})
		}
		res := p.client.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			return fmt.Errorf("write change events: %w", err)
		}
		for _, r := range res {
			p.next[r.Record.Partition] = max(p.next[r.Record.Partition], r.Record.Offset+1)
		}
		for _, id := range c.IDs {
			p.versions[id] = c.Version
		}
	}
	offsets := map[string]int64{"0": 0}
	for part, off := range p.next {
		offsets[strconv.Itoa(int(part))] = off
	}
	s := tbl.CurrentSnapshot()
	v, err := json.Marshal(map[string]any{
		"table": demoTable, "snapshot-id": s.SnapshotID, "sequence-number": s.SequenceNumber, "timestamp-ms": s.TimestampMs,
		"offsets": map[string]any{demoChangeTopic: offsets},
	})
	if err != nil {
		return err
	}
	return p.client.ProduceSync(ctx, &kgo.Record{Topic: demoCommitTopic, Value: v}).FirstErr()
}

// debeziumUpdate is the Debezium envelope (JSON converter, no schema) of an
// update of an order from before to after, in workload.Schema order.
func debeziumUpdate(before, after []any, tsMs int64) ([]byte, error) {
	image := func(row []any) map[string]any {
		m := make(map[string]any, len(row))
		for i, f := range workload.Schema.Fields() {
			m[f.Name] = row[i]
		}
		return m
	}
	return json.Marshal(map[string]any{
		"before": image(before), "after": image(after),
		"source": map[string]any{"connector": "postgresql", "db": "shop", "table": "orders"},
		"op":     "u", "ts_ms": tsMs,
	})
}

// demoView follows the stream and the indexes and shows them: one screen
// redrawn in place on a terminal, plain lines otherwise.
type demoView struct {
	sd         streamDemo
	e          *env
	id         table.Identifier
	reg        *prometheus.Registry
	metricsURL string
	logPath    string
	planned    int

	mu       sync.Mutex
	start    time.Time
	end      time.Time // when the last commit was made; zero while streaming
	commits  []workload.Commit
	pos      map[int64]int // source snapshot id -> position in commits
	idx      map[string]*demoIndexView
	rewrites demoRewrites
	drawn    int  // lines of the screen drawn last on a terminal
	caught   bool // the indexes caught up with the stream's end
}

// demoIndexView is what the view knows of one index.
type demoIndexView struct {
	// covered is how many of the stream's commits an index snapshot covers;
	// lags holds the seconds from each covered commit to the first index
	// snapshot that covered it.
	covered     int
	lags        []float64
	snapshots   float64 // index snapshots published by the daemon
	entries     int64
	rewritten   float64
	reused      float64
	fullBuilds  float64
	sourceSnap  int64
	refreshFail string
}

// demoRewrites counts the conversions of equality deletes.
type demoRewrites struct {
	commits, files, positions float64
}

func (v *demoView) setStart(t time.Time) {
	v.mu.Lock()
	v.start = t
	v.mu.Unlock()
}

func (v *demoView) setDraining() {
	v.mu.Lock()
	v.end = time.Now()
	v.mu.Unlock()
}

func (v *demoView) streamed() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.end.Sub(v.start)
}

func (v *demoView) addCommit(c workload.Commit) {
	v.mu.Lock()
	v.pos[c.SnapshotID] = len(v.commits)
	v.commits = append(v.commits, c)
	v.mu.Unlock()
}

// loop refreshes the view every second and draws it: every second on a
// terminal, every five seconds as plain lines.
func (v *demoView) loop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v.refresh(ctx)
		if v.sd.live || i%5 == 0 {
			v.draw(false)
		}
	}
}

// refresh reads the indexes' snapshots and the daemon's counters.
func (v *demoView) refresh(ctx context.Context) {
	families, _ := v.reg.Gather()
	tbl, tblErr := v.e.cat.LoadTable(ctx, v.id)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rewrites = demoRewrites{}
	for _, name := range demoStreamIndexes {
		iv := v.idx[name]
		iv.snapshots = counterValue(families, "streamidx_flush_commits_total", name)
		iv.rewritten = counterValue(families, "streamidx_compactor_range_files_rewritten_total", name)
		iv.reused = counterValue(families, "streamidx_compactor_range_files_reused_total", name)
		iv.fullBuilds = counterValue(families, "streamidx_compactor_full_builds_total", name)
		v.rewrites.commits += counterValue(families, "streamidx_rewrite_commits_total", name)
		v.rewrites.files += counterValue(families, "streamidx_rewrite_equality_files_removed_total", name)
		v.rewrites.positions += counterValue(families, "streamidx_rewrite_positions_total", name)
		if tblErr != nil {
			iv.refreshFail = tblErr.Error()
			continue
		}
		md, _, err := v.e.indexes.Load(ctx, v.id, name)
		if err != nil {
			iv.refreshFail = err.Error()
			continue
		}
		iv.refreshFail = ""
		// The index snapshots in order: each covers its source commit and
		// the ones before it that no earlier index snapshot covered.
		for _, s := range md.Snapshots {
			i, ok := v.pos[s.SourceTableSnapshotID]
			if !ok || i < iv.covered {
				continue
			}
			for j := iv.covered; j <= i; j++ {
				iv.lags = append(iv.lags, float64(s.TimestampMs-v.commits[j].TimestampMs)/1000)
			}
			iv.covered = i + 1
		}
		cur := md.CurrentSnapshot()
		if cur == nil {
			continue
		}
		iv.sourceSnap = cur.SourceTableSnapshotID
		is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.SnapshotByID(cur.SourceTableSnapshotID)))
		if err != nil {
			iv.refreshFail = err.Error()
			continue
		}
		tf, _, err := v.e.store.ReadTracking(ctx, md, cur, is)
		if err != nil {
			iv.refreshFail = err.Error()
			continue
		}
		iv.entries = 0
		for _, te := range tf.Entries {
			iv.entries += te.RecordCount
		}
	}
}

// waitCaughtUp waits until every index covers source snapshot last and is
// at the table's head (after the rewrites of the stream's last equality
// deletes, which the events-fed index moves over without events), twice a
// second apart, or until timeout.
func (v *demoView) waitCaughtUp(ctx context.Context, last int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	steady := 0
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(500 * time.Millisecond):
		}
		tbl, err := v.e.cat.LoadTable(ctx, v.id)
		if err != nil {
			continue
		}
		ok := true
		for _, name := range demoStreamIndexes {
			md, _, err := v.e.indexes.Load(ctx, v.id, name)
			if err != nil || md.CurrentSnapshot() == nil {
				ok = false
				break
			}
			src := md.CurrentSnapshot().SourceTableSnapshotID
			if !lineage.IsAncestor(tbl, src, last) || src != tbl.CurrentSnapshot().SnapshotID {
				ok = false
			}
		}
		if !ok {
			steady = 0
			continue
		}
		if steady++; steady >= 2 {
			return true
		}
	}
	return false
}

// draw shows the view: the whole screen again on a terminal, else one line
// per index and one for the rewrites.
func (v *demoView) draw(final bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.sd.stdout
	elapsed := time.Since(v.start)
	phase := fmt.Sprintf("streaming, %s of %s", elapsed.Round(time.Second), v.sd.duration)
	if !v.end.IsZero() {
		phase = fmt.Sprintf("stream ended after %s, the daemon catches up", v.end.Sub(v.start).Round(time.Second))
		if final && v.caught {
			phase = fmt.Sprintf("stream ended after %s, the daemon caught up %s later", v.end.Sub(v.start).Round(time.Second),
				time.Since(v.end).Round(time.Second))
		} else if final {
			phase = fmt.Sprintf("stream ended after %s, the daemon did not catch up in %s", v.end.Sub(v.start).Round(time.Second),
				time.Since(v.end).Round(time.Second))
		}
	}
	conv := fmt.Sprintf("equality deletes converted into deletion vectors: %.0f delete files (%.0f row positions) in %.0f rewrite commits",
		v.rewrites.files, v.rewrites.positions, v.rewrites.commits)
	if !v.sd.live {
		at := elapsed.Round(time.Second).String()
		if final {
			at = "caught up"
			if !v.caught {
				at = "did not catch up"
			}
		}
		for _, name := range demoStreamIndexes {
			iv := v.idx[name]
			fmt.Fprintf(out, "[%s] %s: %d of %d commits indexed, lag p50 %s p99 %s, %d entries, range files %.0f rewritten / %.0f reused, %.0f index snapshots%s\n",
				at, name, iv.covered, len(v.commits), lagString(iv.lags, 0.5), lagString(iv.lags, 0.99), iv.entries,
				iv.rewritten, iv.reused, iv.snapshots, demoProblem(iv.refreshFail))
		}
		fmt.Fprintf(out, "[%s] %s\n", at, conv)
		return
	}
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\r\x1b[%dA", v.drawn) // back to the screen's first line
	} else {
		b.WriteString("\n")
	}
	v.drawn = 0
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\x1b[K\n")
		v.drawn++
	}
	line("streamidx demo: CDC upserts on %s, %d orders a commit, one commit a second: %s", demoTable, v.sd.upserts, phase)
	line("commits streamed: %d of %d   metrics: %s   daemon log: %s", len(v.commits), v.planned, v.metricsURL, v.logPath)
	line("")
	line("%-12s %-7s %14s %9s %9s %9s %23s %10s", "index", "fed by", "commits seen", "lag p50", "lag p99", "entries", "range files rewr/reuse", "snapshots")
	for _, name := range demoStreamIndexes {
		iv := v.idx[name]
		src := "table"
		if name == "by_customer" {
			src = "events"
		}
		line("%-12s %-7s %14s %9s %9s %9d %23s %10.0f%s", name, src, fmt.Sprintf("%d/%d", iv.covered, len(v.commits)),
			lagString(iv.lags, 0.5), lagString(iv.lags, 0.99), iv.entries, fmt.Sprintf("%.0f/%.0f", iv.rewritten, iv.reused), iv.snapshots,
			demoProblem(iv.refreshFail))
	}
	line("")
	line("%s", conv)
	b.WriteString("\x1b[J")
	fmt.Fprint(out, b.String())
}

// lagString is the q-quantile of lags, or "-" before any.
func lagString(lags []float64, q float64) string {
	if len(lags) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", percentile(lags, q))
}

func demoProblem(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// programPath is how to run the installed program name from the working
// directory: its name when the PATH finds it beside this program (go
// install, the image), else its path beside this program (make build puts
// them in bin/), relative when that is shorter.
func programPath(name string) string {
	self, err := os.Executable()
	if err != nil {
		return name
	}
	beside := filepath.Join(filepath.Dir(self), name)
	if found, err := exec.LookPath(name); err == nil && resolved(found) == resolved(beside) {
		return name
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, beside); err == nil && !strings.HasPrefix(rel, "..") {
			return shellQuote("./" + rel)
		}
	}
	return shellQuote(beside)
}

// resolved is path absolute with its symbolic links resolved, or path when
// it cannot be.
func resolved(path string) string {
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}
