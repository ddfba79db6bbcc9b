// Package serve answers lookups over HTTP through the indexes that a
// process keeps warm: `streamidx run --serve` mounts it beside /metrics
// on the daemon's listener, `streamidx serve` runs it alone. It is a
// conductor, beside daemon: it loads tables and indexes through the
// catalogs, asks the planner, and writes the answers; stages never import
// it.
//
// The API, under /v1/tables/{ns.table}/indexes:
//
//	GET       .../indexes                  the table's indexes, as `list` shows them
//	GET       .../indexes/{index}          the index, as `inspect --json` prints it
//	GET|POST  .../indexes/{index}/lookup   a lookup: where, snapshot, limit, explain
//
// A lookup answers JSON lines (a header line, then one object per row as
// `lookup --json` prints it, then with explain the plan), or an Arrow IPC
// stream when the request's Accept names application/vnd.apache.arrow.stream.
// Both say which index snapshot and table snapshot answered, in the
// Streamidx-Index-Snapshot and Streamidx-Table-Snapshot response headers and,
// for JSON lines, in the header line. Errors are a JSON object
// {"error": message, "code": word} with a 4xx or 5xx status.
//
// Answers are exact for the requested table snapshot (default: the table's
// current one) through the planner's reconciliation, and come from one
// index snapshot: the metadata is taken once per request (read again after
// Options.MetadataMaxAge). A lookup whose files were expired while it ran
// is retried on freshly read metadata.
//
// Concurrency: a Service is safe for concurrent use.
package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamidx/streamidx/api"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexinfo"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// The media type of Arrow IPC stream answers and the response headers
// that name the snapshots of an answer (see package api).
const (
	ArrowStream         = api.ArrowStream
	HeaderIndexSnapshot = api.HeaderIndexSnapshot
	HeaderTableSnapshot = api.HeaderTableSnapshot
)

// Options configure a Service.
type Options struct {
	// Tables is the Iceberg catalog. Required.
	Tables catalog.Catalog
	// Indexes is the index catalog. Required.
	Indexes indexcatalog.Catalog
	// Store reads index files; its caches are the service's warm state,
	// shared with the daemon in the same process. Default: a store for
	// local files only.
	Store *objstore.Store
	// Token, when set, must come with every request as "Authorization:
	// Bearer <token>"; it is never logged. Default: "" (no token).
	Token string
	// MaxPredicateBytes bounds the predicate of a lookup. Default: 64KiB.
	MaxPredicateBytes int
	// MaxRows bounds the rows of an answer: a lookup that would return
	// more without a limit at most this large is refused. Default: 100000.
	MaxRows int64
	// Timeout bounds the time a request may take. Default: 30s.
	Timeout time.Duration
	// MaxConcurrent bounds the requests answered at once; one beyond it
	// waits up to MaxQueueWait for a slot, then is answered 503 with
	// Retry-After, so that a flood of requests meets a quick refusal
	// rather than a queue that grows with the memory and the latency of
	// every request. Default: 256.
	MaxConcurrent int
	// MaxQueueWait is how long a request waits for a slot. Default: 1s.
	MaxQueueWait time.Duration
	// MetadataMaxAge is how long a table's and an index's metadata, once
	// read, answer requests before they are read again: loading a table
	// with a long history costs more than a lookup. Once it is older, the
	// first request to find it so starts reading it again in the
	// background, preparing the indexes it served for the new table
	// snapshot (their tracking files read, one that lags reconciled), and
	// every request, that one included, answers from what is kept until
	// the refresh is done: no request waits for it. An answer for the
	// "current" table snapshot may then be for a snapshot up to this much
	// older than the newest commit, plus the time of that refresh (its
	// header names it; it is exact for it). Metadata older than twice this
	// (no request came for a while) is read again before the request that
	// finds it answers, and so is metadata that lacks the snapshot a
	// request names. Default: 1s.
	MetadataMaxAge time.Duration
	// Logger receives request failures. Default: discard.
	Logger *slog.Logger
	// Registerer receives the service's metrics. Default: none.
	Registerer prometheus.Registerer
}

// OptionsFromConfig fills the limits, the token and the metadata age of
// the serve section.
func OptionsFromConfig(c config.ServeConfig) Options {
	return Options{Token: c.Token, MaxPredicateBytes: int(c.MaxPredicateBytes), MaxRows: c.MaxRows, Timeout: time.Duration(c.Timeout),
		MetadataMaxAge: time.Duration(c.MetadataMaxAge), MaxConcurrent: c.MaxConcurrentRequests, MaxQueueWait: time.Duration(c.MaxQueueWait)}
}

// Service answers the API. Build it with New and mount Handler.
type Service struct {
	opts    Options
	log     *slog.Logger
	planner *planner.Planner
	metrics *metrics
	// slots holds a value for each request being answered (MaxConcurrent).
	slots chan struct{}

	mu     sync.Mutex
	loaded map[string]loaded // by "t/ns.table" and "i/ns.table/index"
	// refreshing marks the keys of loaded being read again.
	refreshing map[string]bool
	// closed stops new background refreshes; refreshes counts those
	// running, which Close waits for.
	closed    bool
	refreshes sync.WaitGroup
	// ctx ends with Close, and with it the background refreshes.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Service and registers its metrics.
func New(opts Options) (*Service, error) {
	if opts.Tables == nil || opts.Indexes == nil {
		return nil, errors.New("serve: Tables and Indexes are required")
	}
	if opts.Store == nil {
		opts.Store = objstore.Local()
	}
	if opts.MaxPredicateBytes <= 0 {
		opts.MaxPredicateBytes = 64 << 10
	}
	if opts.MaxRows <= 0 {
		opts.MaxRows = 100000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MetadataMaxAge <= 0 {
		opts.MetadataMaxAge = time.Second
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 256
	}
	if opts.MaxQueueWait <= 0 {
		opts.MaxQueueWait = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, log: opts.Logger, planner: planner.New(planner.Options{Store: opts.Store}), metrics: newMetrics(opts.Store),
		loaded: map[string]loaded{}, refreshing: map[string]bool{}, slots: make(chan struct{}, opts.MaxConcurrent)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("register serve metrics: %w", err)
		}
	}
	return s, nil
}

// Close stops the background refreshes of kept metadata and waits for
// them. Requests that come after it read the metadata they need
// themselves.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.refreshes.Wait()
}

// Handler serves the API under /v1/.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/tables/{table}/indexes", s.wrap("indexes", s.listIndexes))
	mux.Handle("GET /v1/tables/{table}/indexes/{index}", s.wrap("index", s.inspectIndex))
	mux.Handle("GET /v1/tables/{table}/indexes/{index}/lookup", s.wrap("lookup", s.lookup))
	mux.Handle("POST /v1/tables/{table}/indexes/{index}/lookup", s.wrap("lookup", s.lookup))
	mux.Handle("/v1/", s.wrap("other", func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{http.StatusNotFound, "not_found", "no such endpoint: " + r.Method + " " + r.URL.Path}
	}))
	return mux
}

// statusClientClosed counts, in the metrics, the requests whose client went
// away before the answer (nginx's convention); it is never sent.
const statusClientClosed = 499

// apiError is an answer other than 200.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// wrap checks the token and the time limit, turns errors into answers and
// counts the request.
func (s *Service) wrap(endpoint string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		status := http.StatusOK
		defer func() {
			s.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
			s.metrics.seconds.WithLabelValues(endpoint).Observe(time.Since(began).Seconds())
		}()
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="streamidx"`)
			status = http.StatusUnauthorized
			writeError(w, &apiError{status, "unauthorized", "a bearer token is required: send Authorization: Bearer <token>"})
			return
		}
		if !s.admit(r.Context()) {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "1")
			writeError(w, &apiError{status, "overloaded", fmt.Sprintf("%d requests are being answered (serve.max-concurrent-requests) and none ended within %s: try again",
				s.opts.MaxConcurrent, s.opts.MaxQueueWait)})
			return
		}
		s.metrics.inFlight.Inc()
		defer func() {
			s.metrics.inFlight.Dec()
			<-s.slots
		}()
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
		defer cancel()
		sw := &startWriter{ResponseWriter: w}
		err := h(sw, r.WithContext(ctx))
		if err == nil {
			return
		}
		if sw.started {
			// The answer was under way: the client sees it cut short.
			s.log.Warn("lookup service answer cut short", "method", r.Method, "path", r.URL.Path, "err", err)
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = s.classify(ctx, err)
		}
		status = ae.status
		if status == statusClientClosed {
			return // nobody to answer
		}
		if status >= 500 {
			s.log.Error("lookup service request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		writeError(w, ae)
	})
}

// admit takes a slot for a request, waiting up to MaxQueueWait for one;
// false when none came (or the client went away).
func (s *Service) admit(ctx context.Context) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	s.metrics.queued.Inc()
	defer s.metrics.queued.Dec()
	t := time.NewTimer(s.opts.MaxQueueWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// startWriter notes whether the answer has begun, after which an error
// can no longer change its status.
type startWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startWriter) WriteHeader(code int) {
	w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

func (s *Service) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// classify maps the errors of the catalogs and the planner to answers.
func (s *Service) classify(ctx context.Context, err error) *apiError {
	var pe *planner.PredicateError
	switch {
	case errors.As(err, &pe):
		return &apiError{http.StatusBadRequest, "bad_predicate", err.Error()}
	case errors.Is(ctx.Err(), context.Canceled):
		return &apiError{statusClientClosed, "client_closed", "the client closed the request"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &apiError{http.StatusRequestTimeout, "timeout",
			fmt.Sprintf("the request took longer than %s (serve.timeout): narrow the predicate or give a limit", s.opts.Timeout)}
	case errors.Is(err, catalog.ErrNoSuchTable):
		return &apiError{http.StatusNotFound, "no_such_table", err.Error()}
	case errors.Is(err, indexcatalog.ErrIndexNotFound):
		return &apiError{http.StatusNotFound, "no_such_index", err.Error()}
	case errors.Is(err, planner.ErrNoIndexSnapshot):
		return &apiError{http.StatusConflict, "no_index_snapshot", err.Error() + ": the index must be built first"}
	case errors.Is(err, planner.ErrCannotReconcile), errors.Is(err, format.ErrTableReplaced):
		return &apiError{http.StatusConflict, "cannot_answer", err.Error()}
	}
	return &apiError{http.StatusInternalServerError, "internal", err.Error()}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del(HeaderIndexSnapshot)
	w.Header().Del(HeaderTableSnapshot)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e.msg, Code: e.code})
}

// loaded is a table or an index's metadata as read at a time.
type loaded struct {
	at       time.Time
	tbl      *table.Table
	md       *format.Metadata
	location string
	err      error // of the index: format.ErrUnsupportedIndexType is kept
}

// current returns what is kept under key. For what is kept but stale
// (read MetadataMaxAge ago or more), claimed says whether the caller is to
// read it again: only the first request to find it stale does, in the
// background (see refresh) unless it is too old to answer from (expired),
// while the requests that come meanwhile go on with what is kept, so that
// a refresh costs no request its time.
func (s *Service) current(key string) (l loaded, have, claimed, expired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, have = s.loaded[key]
	age := time.Since(l.at)
	if have && age >= s.opts.MetadataMaxAge && !s.refreshing[key] {
		s.refreshing[key] = true
		claimed = true
	}
	return l, have, claimed, have && age >= 2*s.opts.MetadataMaxAge
}

// refreshed ends the refresh of key that current gave the caller.
func (s *Service) refreshed(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refreshing, key)
}

// refresh runs read, the refresh of key that current gave the caller, in
// the background, bounded by the request timeout. When it fails because
// the table or the index is gone, kept is forgotten: the next request reads
// it and answers what it finds. When it fails otherwise (a catalog that
// does not answer), kept goes on answering as if read now, so that the
// next attempt comes a MetadataMaxAge later rather than with the next
// request; the failure is logged. Either only if nothing newer was kept
// meanwhile.
func (s *Service) refresh(key string, kept loaded, read func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		delete(s.refreshing, key)
		return
	}
	s.refreshes.Go(func() {
		defer s.refreshed(key)
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
		defer cancel()
		err := read(ctx)
		if err == nil {
			return
		}
		gone := errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, indexcatalog.ErrIndexNotFound)
		if !gone {
			s.log.Warn("lookup service: read metadata again", "key", key, "err", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if cur, ok := s.loaded[key]; !ok || !cur.at.Equal(kept.at) {
			return // replaced meanwhile
		}
		if gone {
			delete(s.loaded, key)
			return
		}
		kept.at = time.Now()
		s.loaded[key] = kept
	})
}

func (s *Service) keep(key string, l loaded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.loaded) >= maxLoaded {
		clear(s.loaded) // many tables: start over rather than track use
	}
	s.loaded[key] = l
}

// maxLoaded bounds the tables and indexes whose metadata is kept.
const maxLoaded = 1024

// loadTable loads the table of the path's {table}, or takes it as kept:
// as read less than MetadataMaxAge ago, or older while it is read again
// in the background (see current), unless reload is set, it expired or it
// lacks snapshot (a table snapshot id, 0 for none).
func (s *Service) loadTable(ctx context.Context, name string, snapshot int64, reload bool) (*table.Table, table.Identifier, error) {
	id, err := config.ParseTable(name)
	if err != nil {
		return nil, nil, &apiError{http.StatusBadRequest, "bad_table", err.Error()}
	}
	key := "t/" + strings.Join(id, ".")
	l, have, claimed, expired := s.current(key)
	if have && !reload && !expired && (snapshot == 0 || l.tbl.SnapshotByID(snapshot) != nil) {
		if claimed {
			s.refresh(key, l, func(ctx context.Context) error {
				_, err := s.readTable(ctx, key, id, l.tbl)
				return err
			})
		}
		return l.tbl, id, nil
	}
	if claimed {
		defer s.refreshed(key)
	}
	tbl, err := s.readTable(ctx, key, id, l.tbl)
	if err != nil {
		return nil, nil, fmt.Errorf("load table %s: %w", name, err)
	}
	return tbl, id, nil
}

// readTable loads table id and keeps it under key; when it differs from
// kept (nil for none), the indexes requests used are first prepared for
// its current snapshot.
func (s *Service) readTable(ctx context.Context, key string, id table.Identifier, kept *table.Table) (*table.Table, error) {
	began := time.Now()
	tbl, err := s.opts.Tables.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	if kept != nil && tbl.MetadataLocation() != kept.MetadataLocation() {
		s.prepareIndexes(ctx, id, tbl)
	}
	s.keep(key, loaded{at: began, tbl: tbl})
	return tbl, nil
}

// prepareIndexes reads again the metadata of the indexes of table id
// that requests have used, and prepares each for the table's current
// snapshot (planner.Prepare: its tracking file read, a lagging index
// reconciled), before the requests that follow answer for that snapshot.
func (s *Service) prepareIndexes(ctx context.Context, id table.Identifier, tbl *table.Table) {
	prefix := "i/" + strings.Join(id, ".") + "/"
	var names []string
	s.mu.Lock()
	for k := range s.loaded {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	for _, name := range names {
		l := s.readIndex(ctx, prefix+name, id, name)
		if l.err != nil || l.md == nil {
			continue
		}
		if err := s.planner.Prepare(ctx, reconcile.Table(tbl), l.md, 0); err != nil {
			// The lookups that follow meet the same failure and answer it.
			s.log.Debug("prepare an index for a new table snapshot", "table", strings.Join(id, "."), "index", name, "err", err)
		}
	}
}

// readIndex reads the metadata of index name of table id and keeps it
// under key when it loads.
func (s *Service) readIndex(ctx context.Context, key string, id table.Identifier, name string) loaded {
	l := loaded{at: time.Now()}
	l.md, l.location, l.err = s.opts.Indexes.Load(ctx, id, name)
	if l.md != nil && (l.err == nil || errors.Is(l.err, format.ErrUnsupportedIndexType)) {
		s.keep(key, l)
		// The metadata read now is the newest this process knows: the
		// decoded tracking files of snapshots it no longer lists go.
		s.opts.Store.ReleaseExpiredTracking(l.md)
	}
	return l
}

// loadIndex loads the table and the index of the path, or takes them as
// kept (see loadTable). unsupported is set for an index of a type
// streamidx does not implement.
func (s *Service) loadIndex(ctx context.Context, tableName, indexName string, snapshot int64, reload bool) (indexinfo.Target, error) {
	tbl, id, err := s.loadTable(ctx, tableName, snapshot, reload)
	if err != nil {
		return indexinfo.Target{}, err
	}
	t := indexinfo.Target{TableName: tableName, IndexName: indexName, Table: tbl}
	key := "i/" + strings.Join(id, ".") + "/" + t.IndexName
	l, have, claimed, expired := s.current(key)
	switch {
	case !have || reload || expired:
		if claimed {
			defer s.refreshed(key)
		}
		l = s.readIndex(ctx, key, id, t.IndexName)
	case claimed:
		s.refresh(key, l, func(ctx context.Context) error {
			if l := s.readIndex(ctx, key, id, t.IndexName); l.md == nil {
				return l.err
			}
			return nil
		})
	}
	t.Metadata, t.MetadataLocation, err = l.md, l.location, l.err
	if errors.Is(err, format.ErrUnsupportedIndexType) && t.Metadata != nil {
		t.Unsupported, err = true, nil
	}
	if err != nil {
		return t, fmt.Errorf("load index %s of %s: %w", t.IndexName, t.TableName, err)
	}
	if err := s.planner.Check(t.Metadata, reconcile.Table(tbl)); err != nil {
		return t, fmt.Errorf("index %s of %s: %w", t.IndexName, t.TableName, err)
	}
	return t, nil
}

// Warm reads the pages of index indexName of table tableName ("ns.t")
// into the lookup cache, up to budget bytes (see planner.Warm), after
// loading both as a request would: a service warmed before it answers
// spares its first lookups the reading of metadata and pages.
func (s *Service) Warm(ctx context.Context, tableName, indexName string, budget int64) (planner.Warmed, error) {
	t, err := s.loadIndex(ctx, tableName, indexName, 0, false)
	if err != nil {
		return planner.Warmed{}, err
	}
	if t.Unsupported {
		return planner.Warmed{}, nil
	}
	w, err := s.planner.Warm(ctx, reconcile.Table(t.Table), t.Metadata, budget)
	if err != nil {
		return w, fmt.Errorf("warm index %s of %s: %w", indexName, tableName, err)
	}
	return w, nil
}

// WarmBudget is what Warm may fill of the lookup cache for each of n
// indexes warmed together: seven eighths of the cache, shared evenly. An
// index whose pages fit is warmed whole, so that no lookup after /readyz
// decodes a page of it (with half the cache, a 10M-entry pk index of 191
// MiB of pages in the default 256 MiB cache left a third of its pages to
// the first lookups); the eighth left holds the row-group statistics and
// page indexes the lookups read beside them and the pages of the files
// the next updates write.
func (s *Service) WarmBudget(n int) int64 {
	return s.opts.Store.LookupCacheBytes() / 8 * 7 / int64(max(n, 1))
}

func (s *Service) listIndexes(w http.ResponseWriter, r *http.Request) error {
	tbl, _, err := s.loadTable(r.Context(), r.PathValue("table"), 0, false)
	if err != nil {
		return err
	}
	id, _ := config.ParseTable(r.PathValue("table"))
	entries, _, err := indexinfo.List(r.Context(), s.opts.Indexes, id)
	if err != nil {
		return err
	}
	indexinfo.FillBehind(entries, tbl)
	return writeJSON(w, api.IndexList{Table: r.PathValue("table"), Indexes: entries})
}

func (s *Service) inspectIndex(w http.ResponseWriter, r *http.Request) error {
	snapshot, err := intParam(r.URL.Query().Get("snapshot"), "snapshot")
	if err != nil {
		return err
	}
	t, err := s.loadIndex(r.Context(), r.PathValue("table"), r.PathValue("index"), 0, false)
	if err != nil {
		return err
	}
	out, err := indexinfo.Inspect(r.Context(), s.opts.Store, t, snapshot)
	if err != nil {
		if errors.Is(err, indexinfo.ErrNoSuchSnapshot) {
			return &apiError{http.StatusNotFound, "no_such_snapshot", err.Error()}
		}
		return err
	}
	return writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func intParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &apiError{http.StatusBadRequest, "bad_parameter", fmt.Sprintf("%s %q: want an integer", name, v)}
	}
	return n, nil
}

// isGone reports an error of a file that disappeared under a lookup: an
// index snapshot expired while it was read.
func isGone(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// discard drains a request body so that the connection can be reused.
func discard(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<16)) }
