package updater

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the updater's Prometheus metrics. They are registered on the
// Registerer given to NewMetrics, never on the global one.
type Metrics struct {
	LagSeconds        *prometheus.GaugeVec
	SnapshotsBehind   *prometheus.GaugeVec
	Commits           *prometheus.CounterVec
	StagedMutations   *prometheus.CounterVec
	FilesRewritten    *prometheus.CounterVec
	FilesReused       *prometheus.CounterVec
	BytesWritten      *prometheus.CounterVec
	CommitConflicts   *prometheus.CounterVec
	CommitRetries     *prometheus.CounterVec
	FullBuilds        *prometheus.CounterVec
	EqualitySlowPath  *prometheus.CounterVec
	Errors            *prometheus.CounterVec
	UpdateSeconds     *prometheus.HistogramVec
	SnapshotsExpired  *prometheus.CounterVec
	OrphanFilesDelete *prometheus.CounterVec
}

// NewMetrics creates and registers the metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	l := []string{"table", "index"}
	m := &Metrics{
		LagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamidx_flush_lag_seconds",
			Help: "Seconds from the source commit of the newest indexed snapshot to its index commit."}, l),
		SnapshotsBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamidx_flush_snapshots_behind",
			Help: "Source snapshots the index has not caught up with."}, l),
		Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_flush_commits_total",
			Help: "Index snapshots published."}, l),
		StagedMutations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_staging_mutations_total",
			Help: "Entry mutations staged."}, l),
		FilesRewritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_compactor_range_files_rewritten_total",
			Help: "Range files replaced by incremental merges."}, l),
		FilesReused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_compactor_range_files_reused_total",
			Help: "Range files carried unchanged into a new index snapshot."}, l),
		BytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_compactor_written_bytes_total",
			Help: "Bytes of range files written."}, l),
		CommitConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_flush_commit_conflicts_total",
			Help: "Updates voided because another writer moved the index first."}, l),
		CommitRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_flush_commit_retries_total",
			Help: "Compare-and-swap attempts repeated after another writer's commit."}, l),
		FullBuilds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_compactor_full_builds_total",
			Help: "Full builds (first build, or fallback when an incremental update cannot apply)."}, l),
		EqualitySlowPath: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_ingest_equality_delete_slow_path_files_total",
			Help: "Data files read in full to resolve equality deletes."}, l),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_updater_errors_total",
			Help: "Failed update attempts (retried)."}, l),
		UpdateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamidx_flush_update_seconds",
			Help: "Time to publish one index snapshot.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}, l),
		SnapshotsExpired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_flush_snapshots_expired_total",
			Help: "Index snapshots expired."}, l),
		OrphanFilesDelete: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamidx_flush_files_deleted_total",
			Help: "Unreferenced index files deleted."}, l),
	}
	if reg != nil {
		reg.MustRegister(m.LagSeconds, m.SnapshotsBehind, m.Commits, m.StagedMutations, m.FilesRewritten,
			m.FilesReused, m.BytesWritten, m.CommitConflicts, m.CommitRetries, m.FullBuilds, m.EqualitySlowPath, m.Errors,
			m.UpdateSeconds, m.SnapshotsExpired, m.OrphanFilesDelete)
	}
	return m
}
