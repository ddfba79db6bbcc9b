package daemon

import (
	"context"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/rewrite"
	"github.com/streamidx/streamidx/updater"
)

// metrics turn what the updater and the notification feed report into
// Prometheus metrics. The stages and the updater never touch Prometheus:
// they return stats, and this is the one place that counts them.
type metrics struct {
	lag              *prometheus.GaugeVec
	commitLag        *prometheus.HistogramVec
	commits          *prometheus.CounterVec
	updateSeconds    *prometheus.HistogramVec
	stagedMutations  *prometheus.CounterVec
	filesRewritten   *prometheus.CounterVec
	filesReused      *prometheus.CounterVec
	bytesWritten     *prometheus.CounterVec
	entriesRewritten *prometheus.CounterVec
	entriesCopied    *prometheus.CounterVec
	fullBuilds       *prometheus.CounterVec
	commitConflicts  *prometheus.CounterVec
	commitRetries    *prometheus.CounterVec
	equalitySlowPath *prometheus.CounterVec
	errors           *prometheus.CounterVec
	paused           *prometheus.CounterVec
	halted           *prometheus.GaugeVec
	snapshotsExpired *prometheus.CounterVec
	filesDeleted     *prometheus.CounterVec

	rewriteFilesRemoved *prometheus.CounterVec
	rewritePositions    *prometheus.CounterVec
	rewriteCommits      *prometheus.CounterVec
	rewriteConflicts    *prometheus.CounterVec
	rewriteSeconds      *prometheus.HistogramVec

	notifications        prometheus.Counter
	decodeErrors         prometheus.Counter
	notificationTimeouts prometheus.Counter
	pending              prometheus.Gauge

	eventsStaged       prometheus.Counter
	eventTombstones    prometheus.Counter
	eventsDeadLettered prometheus.Counter
}

func newMetrics() *metrics {
	l := []string{"table", "index"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, l)
	}
	return &metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamidx_flush_lag_seconds",
			Help: "Seconds from the source commit of the newest indexed snapshot to its index commit."}, l),
		commitLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamidx_flush_commit_lag_seconds",
			Help:    "Seconds from each source commit to the commit of the index snapshot that indexes it.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16)}, l),
		commits: counter("streamidx_flush_commits_total", "Index snapshots published."),
		updateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamidx_flush_update_seconds",
			Help: "Time to publish one index snapshot.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}, l),
		stagedMutations:  counter("streamidx_staging_mutations_total", "Entry mutations staged."),
		filesRewritten:   counter("streamidx_compactor_range_files_rewritten_total", "Range files replaced by incremental merges."),
		filesReused:      counter("streamidx_compactor_range_files_reused_total", "Range files carried unchanged into a new index snapshot."),
		bytesWritten:     counter("streamidx_compactor_written_bytes_total", "Bytes of range files written."),
		entriesRewritten: counter("streamidx_compactor_written_entries_total", "Entries decoded and written to range files (those of rewritten files that stayed, and those inserted)."),
		entriesCopied:    counter("streamidx_compactor_copied_entries_total", "Entries of row groups that merges copied into new range files as they were, without decoding."),
		fullBuilds:       counter("streamidx_compactor_full_builds_total", "Full builds (first build, or fallback when an incremental update cannot apply)."),
		commitConflicts:  counter("streamidx_flush_commit_conflicts_total", "Updates voided because another writer moved the index first."),
		commitRetries:    counter("streamidx_flush_commit_retries_total", "Compare-and-swap attempts repeated after another writer's commit."),
		equalitySlowPath: counter("streamidx_ingest_equality_delete_slow_path_files_total", "Data files read in full to resolve equality deletes."),
		errors:           counter("streamidx_updater_errors_total", "Failed update attempts."),
		paused:           counter("streamidx_updater_paused_seconds_total", "Seconds long updates waited in their merge or build for shorter updates of other indexes (run.long-update-after)."),
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamidx_updater_halted",
			Help: "1 when the index's worker stopped on an error retrying cannot fix (a corrupt file); see the log."}, l),
		snapshotsExpired: counter("streamidx_flush_snapshots_expired_total", "Index snapshots expired."),
		filesDeleted:     counter("streamidx_flush_files_deleted_total", "Unreferenced index files deleted."),

		rewriteFilesRemoved: counter("streamidx_rewrite_equality_files_removed_total", "Equality delete files removed by rewrites into deletion vectors or position deletes."),
		rewritePositions:    counter("streamidx_rewrite_positions_total", "Row positions that rewrites turned from equality deletes into position deletes."),
		rewriteCommits:      counter("streamidx_rewrite_commits_total", "Rewrites of equality deletes committed to the table."),
		rewriteConflicts:    counter("streamidx_rewrite_conflicts_total", "Rewrite commits that met another writer's commit (then checked, committed on top or planned again)."),
		rewriteSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamidx_rewrite_seconds",
			Help: "Time of one rewrite of equality deletes, from planning to commit.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 16)}, l),

		notifications: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_notifications_total",
			Help: "Commit notifications read."}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_notification_decode_errors_total",
			Help: "Commit notifications that could not be decoded and went to the dead-letter topic."}),
		notificationTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_notification_timeouts_total",
			Help: "Commit notifications whose snapshot did not appear in the table's history in time and went to the dead-letter topic."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamidx_ingest_notifications_pending",
			Help: "Commit notifications read whose snapshot not every index covers yet."}),
		eventsStaged: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_events_total",
			Help: "Change events decoded and staged for the events-fed indexes of their table."}),
		eventTombstones: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_event_tombstones_total",
			Help: "Change-topic records with no value (tombstones), skipped."}),
		eventsDeadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_events_dead_lettered_total",
			Help: "Change events that could not be decoded or did not fit their table and went to <topic>.dlq."}),
	}
}

func (m *metrics) register(reg prometheus.Registerer, behind prometheus.Collector) error {
	for _, c := range []prometheus.Collector{m.lag, m.commitLag, m.commits, m.updateSeconds, m.stagedMutations, m.filesRewritten,
		m.filesReused, m.bytesWritten, m.entriesRewritten, m.entriesCopied, m.fullBuilds, m.commitConflicts, m.commitRetries, m.equalitySlowPath, m.errors, m.paused, m.halted,
		m.snapshotsExpired, m.filesDeleted, m.rewriteFilesRemoved, m.rewritePositions, m.rewriteCommits, m.rewriteConflicts,
		m.rewriteSeconds, m.notifications, m.decodeErrors, m.notificationTimeouts, m.pending,
		m.eventsStaged, m.eventTombstones, m.eventsDeadLettered, behind} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe counts what one updater step did.
func (m *metrics) observe(w *worker, st updater.Stats, err error) {
	l := []string{w.table, w.index}
	if err != nil {
		m.errors.WithLabelValues(l...).Inc()
	}
	m.commitConflicts.WithLabelValues(l...).Add(float64(st.CommitConflicts))
	m.commitRetries.WithLabelValues(l...).Add(float64(st.CommitRetries))
	m.snapshotsExpired.WithLabelValues(l...).Add(float64(st.SnapshotsExpired))
	m.filesDeleted.WithLabelValues(l...).Add(float64(st.FilesDeleted))
	m.paused.WithLabelValues(l...).Add(st.Paused.Seconds())
	p := st.Published
	if p == nil {
		return
	}
	m.commits.WithLabelValues(l...).Inc()
	m.updateSeconds.WithLabelValues(l...).Observe(p.Took.Seconds())
	m.lag.WithLabelValues(l...).Set(p.Lag().Seconds())
	m.commitLag.WithLabelValues(l...).Observe(p.Lag().Seconds())
	m.stagedMutations.WithLabelValues(l...).Add(float64(p.StagedMutations))
	m.equalitySlowPath.WithLabelValues(l...).Add(float64(p.EqualitySlowPathFiles))
	m.filesRewritten.WithLabelValues(l...).Add(float64(p.FilesRewritten))
	m.filesReused.WithLabelValues(l...).Add(float64(p.FilesReused))
	m.bytesWritten.WithLabelValues(l...).Add(float64(p.BytesWritten))
	m.entriesRewritten.WithLabelValues(l...).Add(float64(p.EntriesRewritten))
	m.entriesCopied.WithLabelValues(l...).Add(float64(p.EntriesCopied))
	if p.FullBuild {
		m.fullBuilds.WithLabelValues(l...).Inc()
	}
}

// observeRewrite counts what one rewrite of equality deletes did.
func (m *metrics) observeRewrite(w *worker, res *rewrite.Result) {
	l := []string{w.table, w.index}
	m.rewriteConflicts.WithLabelValues(l...).Add(float64(res.Conflicts))
	if res.CommittedSnapshotID == 0 {
		return
	}
	m.rewriteCommits.WithLabelValues(l...).Inc()
	m.rewriteFilesRemoved.WithLabelValues(l...).Add(float64(res.EqualityFilesRemoved))
	m.rewritePositions.WithLabelValues(l...).Add(float64(res.PositionsAdded))
	m.rewriteSeconds.WithLabelValues(l...).Observe(res.Took.Seconds())
}

// behindCollector reports streamidx_flush_snapshots_behind from the catalogs
// at every scrape, so it tells how far each index is behind its table now,
// whatever its worker is doing (busy with a long update, waiting, halted).
type behindCollector struct {
	d    *Daemon
	desc *prometheus.Desc
}

func newBehindCollector(d *Daemon) *behindCollector {
	return &behindCollector{d: d, desc: prometheus.NewDesc("streamidx_flush_snapshots_behind",
		"Snapshots in the table's current history newer than the one the index covers (all of them when it covers none of them), read from the catalogs at scrape time.",
		[]string{"table", "index"}, nil)}
}

func (c *behindCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// scrapeTimeout bounds the catalog reads of one scrape.
const scrapeTimeout = 10 * time.Second

func (c *behindCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for name, ws := range c.d.byTable {
		tbl, err := c.d.tables.LoadTable(ctx, ws[0].id)
		if err != nil {
			c.d.log.Debug("snapshots behind: load table", "table", name, "err", err)
			continue
		}
		for _, w := range ws {
			md, _, err := c.d.indexes.Load(ctx, w.id, w.index)
			if err != nil {
				c.d.log.Debug("snapshots behind: load index", "table", name, "index", w.index, "err", err)
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(snapshotsBehind(tbl, md)), name, w.index)
		}
	}
}

// snapshotsBehind counts the snapshots of tbl's current history that are
// newer than the source snapshot of md's current index snapshot; all of
// them when that snapshot is not in the history (no index snapshot yet, a
// rollback, expired history).
func snapshotsBehind(tbl *table.Table, md *format.Metadata) int {
	head := tbl.CurrentSnapshot()
	if head == nil {
		return 0
	}
	if cur := md.CurrentSnapshot(); cur != nil {
		if between, found := lineage.Since(tbl, head, cur.SourceTableSnapshotID); found {
			return len(between)
		}
	}
	n := 0
	for range lineage.Ancestors(tbl, head) {
		n++
	}
	return n
}
