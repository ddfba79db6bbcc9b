package serve_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamidx/streamidx/client"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/serve"
	"github.com/streamidx/streamidx/updater"
)

// fixture is a table with a pk index in a SQL index catalog, and the
// service over them on a real listener.
type fixture struct {
	t       testing.TB
	tbl     *table.Table
	indexes indexcatalog.Catalog
	store   *objstore.Store
	client  *client.Client
	base    string       // the service's URL
	handler http.Handler // the service's handler, for benchmarks
}

func newFixture(t *testing.T, rows int) *fixture {
	t.Helper()
	// Every request reads the metadata: the tests publish between requests.
	return newFixtureWith(t, rows, func(o *serve.Options) { o.MetadataMaxAge = time.Nanosecond })
}

// newFixtureWith is newFixture with the service's options changed by
// change.
func newFixtureWith(t testing.TB, rows int, change func(*serve.Options)) *fixture {
	t.Helper()
	ctx := context.Background()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, rows, 0)...)
	db, err := indexcatalog.OpenSQLite(filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := objstore.New(objstore.Options{FooterCacheBytes: 1 << 20})
	idx, err := indexcatalog.NewSQL(ctx, db, indexcatalog.DialectSQLite, "default", indexcatalog.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	def, err := indexdef.Parse([]byte(`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), strings.TrimRight(tbl.Location(), "/")+"/indexes/pk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Create(ctx, tbl.Identifier(), "pk", md); err != nil {
		t.Fatal(err)
	}
	opts := serve.Options{Tables: cat, Indexes: idx, Store: store}
	change(&opts)
	svc, err := serve.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(svc.Close)
	t.Cleanup(srv.Close)
	f := &fixture{t: t, tbl: tbl, indexes: idx, store: store, client: client.New(srv.URL, client.Options{}), base: srv.URL, handler: svc.Handler()}
	f.build()
	return f
}

// build publishes an index snapshot for the table's current snapshot.
func (f *fixture) build() {
	f.t.Helper()
	ctx := context.Background()
	md, _, err := f.indexes.Load(ctx, f.tbl.Identifier(), "pk")
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := updater.BuildAndPublish(ctx, f.indexes, f.tbl, "pk", md, f.tbl.CurrentSnapshot(), updater.BuildOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) lookup(where string) *client.Answer {
	f.t.Helper()
	ans, err := f.client.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: where})
	if err != nil {
		f.t.Fatal(err)
	}
	return ans
}

// TestExpiredSnapshotsTrackingReleased: the decoded tracking file of an
// index snapshot stays cached while the snapshot lives (a second lookup
// hits the cache) and is released once another process expired the
// snapshot, at the service's next read of the index's metadata.
func TestExpiredSnapshotsTrackingReleased(t *testing.T) {
	f := newFixture(t, 30)
	var used []int64
	for i := range 3 {
		if i > 0 {
			f.tbl, _ = testtables.Append(t, f.tbl, testtables.OrderRows(30+10*i, 40+10*i, 0)...)
			f.build()
		}
		ans := f.lookup("id = 1")
		used = append(used, ans.Header.IndexSnapshotID)
		if len(ans.Rows) != 1 || ans.Header.CommitsBehind != 0 {
			t.Fatalf("lookup %d: %+v", i, ans)
		}
	}
	before := f.store.CacheStats().Tracking
	f.lookup("id = 2")
	after := f.store.CacheStats().Tracking
	if after.Entries != 3 || after.Hits <= before.Hits || after.Misses != before.Misses {
		t.Fatalf("tracking cache %+v after %+v: want the 3 snapshots' files, and the lookup served from it", after, before)
	}

	// Another process (its own store) expires all but the current snapshot.
	ctx := context.Background()
	res, err := flush.Expire(ctx, f.indexes, f.tbl.Identifier(), "pk", func(md *format.Metadata) (*format.IndexSchema, error) {
		return format.NewIndexSchema(md, f.tbl.Schema())
	}, flush.ExpireOptions{RetainLast: 1, OrphanGrace: time.Nanosecond, Store: objstore.Local()})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotsExpired != 2 {
		t.Fatalf("expired %d snapshots, want the 2 older ones", res.SnapshotsExpired)
	}
	ans := f.lookup("id = 3")
	if ans.Header.IndexSnapshotID != used[2] {
		t.Errorf("answered from index snapshot %d, want the current %d", ans.Header.IndexSnapshotID, used[2])
	}
	if st := f.store.CacheStats().Tracking; st.Entries != 1 || st.Bytes <= 0 {
		t.Errorf("tracking cache %+v after the expiry, want only the current snapshot's file", st)
	}
}

// TestFooterCacheWithinBudget: range file footers are cached up to the
// budget and a lookup of a file read before takes its footer from there.
func TestFooterCacheWithinBudget(t *testing.T) {
	f := newFixture(t, 50)
	f.lookup("id = 7")
	first := f.store.CacheStats().Footer
	f.lookup("id = 7")
	second := f.store.CacheStats().Footer
	if first.Entries == 0 || first.Bytes <= 0 || first.Bytes > 1<<20 || second.Hits <= first.Hits {
		t.Errorf("footer cache %+v then %+v: want footers kept within 1 MiB and the second lookup served from them", first, second)
	}
}

// gatedCatalog is a catalog whose LoadTable, once closed, waits until it
// is opened again (or fails, with fail set), and counts its calls.
type gatedCatalog struct {
	catalog.Catalog
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	entered chan struct{} // receives a value when a call waits at the gate
	fail    error
	calls   int
}

func (c *gatedCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	c.mu.Lock()
	c.calls++
	gate, fail := c.gate, c.fail
	c.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	if gate != nil {
		c.entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Catalog.LoadTable(ctx, id)
}

func (c *gatedCatalog) set(f func(*gatedCatalog)) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
	return c.calls
}

// TestStaleMetadataReadInBackground: once the kept metadata is older than
// MetadataMaxAge, the request that finds it so answers from it at once,
// as do the others, while a refresh reads the table again (here held back
// until the test lets it go); then the answers move to the new snapshot.
// A refresh that fails leaves the kept metadata answering, and is tried
// again a MetadataMaxAge later, not on every request.
func TestStaleMetadataReadInBackground(t *testing.T) {
	const maxAge = time.Second
	var gc *gatedCatalog
	f := newFixtureWith(t, 40, func(o *serve.Options) {
		gc = &gatedCatalog{Catalog: o.Tables, entered: make(chan struct{}, 16)}
		o.Tables, o.MetadataMaxAge = gc, maxAge
	})
	first := f.lookup("id = 1")
	old := f.tbl.CurrentSnapshot().SnapshotID
	if first.Header.TableSnapshotID != old {
		t.Fatalf("first answer for table snapshot %d, want the current %d", first.Header.TableSnapshotID, old)
	}
	f.tbl, _ = testtables.Append(t, f.tbl, testtables.OrderRows(40, 50, 0)...)
	f.build()
	gate := make(chan struct{})
	gc.set(func(c *gatedCatalog) { c.gate = gate })
	time.Sleep(maxAge + maxAge/10) // stale, not expired

	for i := range 3 {
		ans := f.lookup("id = 45")
		if ans.Header.TableSnapshotID != old || len(ans.Rows) != 0 {
			t.Fatalf("lookup %d during the refresh: table snapshot %d, %d rows; want the kept snapshot %d, where order 45 is not yet", i,
				ans.Header.TableSnapshotID, len(ans.Rows), old)
		}
	}
	select {
	case <-gc.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh read the table again")
	}
	close(gate)
	gc.set(func(c *gatedCatalog) { c.gate = nil })
	now := f.tbl.CurrentSnapshot().SnapshotID
	deadline := time.Now().Add(10 * time.Second)
	for {
		ans := f.lookup("id = 45")
		if ans.Header.TableSnapshotID == now {
			if len(ans.Rows) != 1 || ans.Header.CommitsBehind != 0 {
				t.Fatalf("after the refresh: %d rows, %d commits behind; want order 45 from an index snapshot of the new table snapshot", len(ans.Rows),
					ans.Header.CommitsBehind)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers still for table snapshot %d after the refresh was let go; want %d", ans.Header.TableSnapshotID, now)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A failing refresh: the kept metadata answers, and the next attempt
	// waits a MetadataMaxAge.
	before := gc.set(func(c *gatedCatalog) { c.fail = errors.New("catalog down") })
	time.Sleep(maxAge + maxAge/10)
	for i := range 5 {
		if ans := f.lookup("id = 45"); ans.Header.TableSnapshotID != now || len(ans.Rows) != 1 {
			t.Fatalf("lookup %d with the catalog down: table snapshot %d, %d rows; want the kept %d and order 45", i, ans.Header.TableSnapshotID,
				len(ans.Rows), now)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if calls := gc.set(func(*gatedCatalog) {}); calls != before+1 {
		t.Errorf("%d reads of the table while it failed, want 1: a failed refresh is tried again a MetadataMaxAge later", calls-before)
	}
}

// TestDroppedIndexForgottenByRefresh: an index dropped while the service
// keeps its metadata is answered as gone once a background refresh finds
// it so, not served from what was kept.
func TestDroppedIndexForgottenByRefresh(t *testing.T) {
	const maxAge = time.Second
	f := newFixtureWith(t, 20, func(o *serve.Options) { o.MetadataMaxAge = maxAge })
	f.lookup("id = 1")
	if err := f.indexes.Drop(context.Background(), f.tbl.Identifier(), "pk"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(maxAge + maxAge/10) // stale, not expired: the next lookup starts a refresh
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := f.client.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id = 1"})
		var ae *client.Error
		if errors.As(err, &ae) && ae.Code == "no_such_index" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookups of a dropped index still answer (last: %v), want no_such_index once the refresh found it gone", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOverloadIsRefusedQuickly: with every slot taken (MaxConcurrent 1,
// the one request held at the catalog), a request waits for a slot (the
// queued gauge counts it) and is answered once the slot frees within
// MaxQueueWait; a request that waits longer is answered 503 overloaded
// with Retry-After; the in-flight gauge counts the request being
// answered; once it ends, requests are answered again.
func TestOverloadIsRefusedQuickly(t *testing.T) {
	t.Run("waits for a slot", func(t *testing.T) {
		var gc *gatedCatalog
		reg := prometheus.NewRegistry()
		f := newFixtureWith(t, 20, func(o *serve.Options) {
			gc = &gatedCatalog{Catalog: o.Tables, entered: make(chan struct{}, 16)}
			o.Tables, o.MetadataMaxAge = gc, time.Nanosecond
			o.MaxConcurrent, o.MaxQueueWait = 1, time.Minute
			o.Registerer = reg
		})
		gate := make(chan struct{})
		gc.set(func(c *gatedCatalog) { c.gate = gate })
		results := make(chan error, 2)
		lookup := func(id string) {
			_, err := f.client.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id = " + id})
			results <- err
		}
		go lookup("3")
		<-gc.entered
		go lookup("4")
		waitUntil(t, "the second request waits for a slot", func() bool { return gauge(t, reg, "streamidx_serve_requests_queued") == 1 })
		close(gate)
		gc.set(func(c *gatedCatalog) { c.gate = nil })
		for range 2 {
			if err := <-results; err != nil {
				t.Errorf("a request: %v", err)
			}
		}
		if q := gauge(t, reg, "streamidx_serve_requests_queued"); q != 0 {
			t.Errorf("queued %v once all ended", q)
		}
	})

	var gc *gatedCatalog
	reg := prometheus.NewRegistry()
	f := newFixtureWith(t, 20, func(o *serve.Options) {
		gc = &gatedCatalog{Catalog: o.Tables, entered: make(chan struct{}, 16)}
		o.Tables, o.MetadataMaxAge = gc, time.Nanosecond // every request reads the table
		o.MaxConcurrent, o.MaxQueueWait = 1, 100*time.Millisecond
		o.Registerer = reg
	})
	gate := make(chan struct{})
	gc.set(func(c *gatedCatalog) { c.gate = gate })
	held := make(chan error, 1)
	go func() {
		_, err := f.client.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id = 3"})
		held <- err
	}()
	select {
	case <-gc.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the catalog")
	}
	if got := gauge(t, reg, "streamidx_serve_requests_in_flight"); got != 1 {
		t.Errorf("in flight %v, want 1", got)
	}
	_, err := f.client.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id = 4"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 503 || ce.Code != "overloaded" {
		t.Fatalf("a request beyond the slots: %v, want 503 overloaded", err)
	}
	gc.set(func(c *gatedCatalog) { c.gate = nil })
	close(gate)
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	if ans := f.lookup("id = 4"); len(ans.Rows) != 1 {
		t.Errorf("after the overload: %d rows, want 1", len(ans.Rows))
	}
	if got := gauge(t, reg, "streamidx_serve_requests_in_flight"); got != 0 {
		t.Errorf("in flight %v once all ended, want 0", got)
	}
}

// gauge reads an unlabelled gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
