package updater

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/staging"
)

// row is order id of the shared orders fixture in the given version.
func row(id int64, version int) []any { return testtables.OrderRow(int(id), version) }

// env is a table with indexes, an index catalog and a staging store.
type env struct {
	t       *testing.T
	tbl     *table.Table
	indexes indexcatalog.Catalog
	store   *staging.Store
	cat     *sqlcat.Catalog
}

var testDefinitions = []string{
	`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	`{"name":"by_customer","identity":["customer_id","id"],"materialized":["name"],"cluster":["bucket(4, customer_id)","customer_id","id"]}`,
}

func newEnv(t *testing.T, formatVersion int) *env {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: formatVersion, RowGroupRows: 8})
	ic := testtables.IndexCatalog(t, warehouse)
	testtables.CreateIndexes(t, ic, tbl, testDefinitions...)
	store, err := staging.OpenStore(t.TempDir(), staging.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &env{t: t, tbl: tbl, indexes: ic, store: store, cat: cat.(*sqlcat.Catalog)}
}

// smallFiles are the range files of most tests: 1 KiB, so that a small
// table has many; oneFile keeps the index in one file of row groups of 16
// entries, which merges copy when the delta does not reach them.
var (
	smallFiles = compactor.RangeWriterOptions{TargetFileSize: 1 << 10, RowGroupRows: 16}
	oneFile    = compactor.RangeWriterOptions{TargetFileSize: 1 << 30, TargetFileEntries: 1 << 30, RowGroupRows: 16}
)

func (e *env) updater(index string, policy Policy) *Updater {
	return e.updaterWith(index, policy, smallFiles)
}

func (e *env) updaterWith(index string, policy Policy, rw compactor.RangeWriterOptions) *Updater {
	return New(e.cat, e.indexes, e.store, e.tbl.Identifier(), index, Options{Policy: policy, Range: rw})
}

// align steps u until the index covers the table's current snapshot and
// returns how many index snapshots it published.
func align(ctx context.Context, u *Updater, props PropertiesFunc) (int, error) {
	published, _, err := alignCounting(ctx, u, props)
	return published, err
}

// alignCounting is align that also returns the row groups the merges
// copied.
func alignCounting(ctx context.Context, u *Updater, props PropertiesFunc) (published, copied int, err error) {
	for {
		st, err := u.Step(ctx, props)
		if st.Published != nil {
			published++
			copied += st.Published.RowGroupsCopied
		}
		if err != nil || st.Aligned {
			return published, copied, err
		}
	}
}

// verifyCurrent checks the index's current snapshot with the independent
// verifier and that it is aligned with the table's current snapshot.
func (e *env) verifyCurrent(index string, step int) {
	e.t.Helper()
	ctx := context.Background()
	md, _, err := e.indexes.Load(ctx, e.tbl.Identifier(), index)
	if err != nil {
		e.t.Fatal(err)
	}
	tbl, err := e.cat.LoadTable(ctx, e.tbl.Identifier())
	if err != nil {
		e.t.Fatal(err)
	}
	cur := md.CurrentSnapshot()
	if cur == nil || cur.SourceTableSnapshotID != tbl.CurrentSnapshot().SnapshotID {
		e.t.Fatalf("step %d: index %s is not aligned with the table's current snapshot", step, index)
	}
	rep, err := verify.Verify(ctx, tbl, md, cur, verify.Options{})
	if err != nil {
		e.t.Fatalf("step %d: verify %s: %v", step, index, err)
	}
	if !rep.Exact() {
		e.t.Fatalf("step %d: index %s is not exact:\n%s", step, index, rep.Summary())
	}
}

// TestFiftyCommits drives 50 source commits of every kind through the
// updater; after each, the index snapshot aligned with it must verify.
func TestFiftyCommits(t *testing.T) {
	for _, tc := range []struct {
		fv    int
		files string
		rw    compactor.RangeWriterOptions
	}{{2, "small files", smallFiles}, {3, "small files", smallFiles}, {3, "one file", oneFile}} {
		fv := tc.fv
		t.Run(fmt.Sprintf("v%d %s", fv, tc.files), func(t *testing.T) {
			e := newEnv(t, fv)
			updaters := []*Updater{e.updaterWith("pk", PolicyEvery, tc.rw), e.updaterWith("by_customer", PolicyEvery, tc.rw)}
			copied := map[string]int{}
			r := rand.New(rand.NewPCG(7, uint64(fv)))
			live := map[int64]int{} // id -> version
			next := int64(0)
			tbl := e.tbl
			ctx := context.Background()
			kinds := map[string]int{}
			for step := 1; step <= 50; step++ {
				var kind string
				files := testtables.LiveFiles(t, tbl, iceberg.EntryContentData)
				switch {
				case step == 1 || step%7 == 1:
					kind = "append"
					var rows [][]any
					for range 20 + r.IntN(20) {
						rows = append(rows, row(next, 0))
						live[next] = 0
						next++
					}
					tbl, _ = testtables.Append(t, tbl, rows...)
				case step%7 == 2 || step%7 == 5:
					kind = "upsert"
					var dels, rows [][]any
					for id, v := range live {
						if r.IntN(6) == 0 {
							dels = append(dels, []any{id})
							rows = append(rows, row(id, v+1))
							live[id] = v + 1
						}
					}
					if len(dels) == 0 {
						dels, rows = [][]any{{int64(0)}}, [][]any{row(0, 9)}
						live[0] = 9
					}
					del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, dels...)
					tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
				case step%7 == 3:
					f := files[r.IntN(len(files))]
					if fv >= 3 {
						kind = "deletion vector"
						tbl, _ = testtables.AddDV(t, tbl, f, int64(r.IntN(int(f.Count()))), int64(r.IntN(int(f.Count()))))
					} else {
						kind = "position delete"
						tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f, Pos: []int64{int64(r.IntN(int(f.Count())))}})
					}
				case step%7 == 4:
					kind = "equality delete"
					tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(r.IntN(13))})
				case step%7 == 6 && step%2 == 0:
					kind = "rewrite"
					victim := files[r.IntN(len(files))]
					tbl, _ = testtables.Rewrite(t, tbl, []iceberg.DataFile{victim}, row(next, 5), row(next+1, 5))
					next += 2
				default:
					kind = "overwrite"
					victim := files[r.IntN(len(files))]
					tbl, _ = testtables.Rewrite(t, tbl, []iceberg.DataFile{victim}, row(next, 7))
					next++
				}
				kinds[kind]++
				for _, u := range updaters {
					n, c, err := alignCounting(ctx, u, nil)
					copied[u.index] += c
					if err != nil {
						t.Fatalf("step %d (%s): update %s: %v", step, kind, u.index, err)
					}
					if n != 1 {
						t.Fatalf("step %d (%s): %s published %d index snapshots, want 1", step, kind, u.index, n)
					}
					e.verifyCurrent(u.index, step)
				}
			}
			t.Logf("commit kinds: %v; row groups copied: %v", kinds, copied)
			// pk's entries are all stored: its merges copy the row groups a
			// commit leaves alone; by_customer's bucket is computed.
			if tc.files == "one file" && (copied["pk"] < 50 || copied["by_customer"] != 0) {
				t.Errorf("row groups copied by merges: %v; want 50 or more for pk, none for by_customer", copied)
			}
			for _, k := range []string{"append", "upsert", "equality delete", "rewrite", "overwrite"} {
				if kinds[k] == 0 {
					t.Errorf("the script made no %s commit", k)
				}
			}
			md, _, _ := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
			if len(md.Snapshots) < 40 { // 50 published; expiry keeps the newest ones
				t.Errorf("only %d index snapshots", len(md.Snapshots))
			}
			// The expiries after every tenth commit remembered what each
			// retained tracking file lists rather than reading them all again.
			for _, u := range updaters {
				if n := u.opts.Expire.References.Len(); n < 10 {
					t.Errorf("%s's expiries remember %d tracking files, want those of its retained snapshots", u.index, n)
				}
			}
		})
	}
}

// TestLatestSkipsToNewest: behind by several commits, policy latest
// publishes one index snapshot for the newest source snapshot.
func TestLatestSkipsToNewest(t *testing.T) {
	e := newEnv(t, 2)
	tbl := e.tbl
	tbl, _ = testtables.Append(t, tbl, row(1, 0), row(2, 0))
	u := e.updater("pk", PolicyLatest)
	if n, err := align(context.Background(), u, nil); err != nil || n != 1 {
		t.Fatalf("first build: %d %v", n, err)
	}
	for i := int64(3); i < 7; i++ {
		tbl, _ = testtables.Append(t, tbl, row(i, 0))
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(2)})
	n, err := align(context.Background(), u, func(*table.Table, *table.Snapshot) map[string]string {
		return map[string]string{"streamidx.test": "x"}
	})
	if err != nil || n != 1 {
		t.Fatalf("latest: published %d, %v", n, err)
	}
	e.verifyCurrent("pk", 1)
	md, _, _ := e.indexes.Load(context.Background(), e.tbl.Identifier(), "pk")
	if len(md.Snapshots) != 2 || md.CurrentSnapshot().Properties["streamidx.test"] != "x" {
		t.Errorf("snapshots %d, properties %v", len(md.Snapshots), md.CurrentSnapshot().Properties)
	}
}

// TestTwoUpdatersOneIndex: two updaters on the same index, interleaved,
// lose no source snapshot and corrupt nothing.
func TestTwoUpdatersOneIndex(t *testing.T) {
	e := newEnv(t, 2)
	tbl := e.tbl
	// Two processes: each has its own staging store.
	a := e.updater("pk", PolicyEvery)
	other, err := staging.OpenStore(t.TempDir(), staging.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	b := New(e.cat, e.indexes, other, e.tbl.Identifier(), "pk", a.opts)
	ctx := context.Background()
	var sources []int64
	for i := int64(0); i < 8; i++ {
		tbl, _ = testtables.Append(t, tbl, row(i*3, 0), row(i*3+1, 0), row(i*3+2, 0))
		if i%3 == 1 {
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{i * 3})
		}
		sources = append(sources, tbl.CurrentSnapshot().SnapshotID)
		done := make(chan error, 2)
		for _, u := range []*Updater{a, b} {
			go func() { _, err := align(ctx, u, nil); done <- err }()
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		e.verifyCurrent("pk", int(i))
	}
	md, _, _ := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
	seen := map[int64]int{}
	for _, s := range md.Snapshots {
		seen[s.SourceTableSnapshotID]++
	}
	for _, s := range sources {
		if seen[s] != 1 {
			t.Errorf("source snapshot %d has %d index snapshots, want exactly 1", s, seen[s])
		}
	}
}

// TestEqualityDeletesThroughTheIndex: an upsert keyed on the index's leading
// cluster field is resolved through the index (no data file read in full),
// one on another column takes the slow path; both stay exact.
func TestEqualityDeletesThroughTheIndex(t *testing.T) {
	e := newEnv(t, 2)
	tbl := e.tbl
	var rows [][]any
	for i := range int64(200) {
		rows = append(rows, row(i, 0))
	}
	tbl, _ = testtables.Append(t, tbl, rows[:100]...)
	tbl, _ = testtables.Append(t, tbl, rows[100:]...)
	u := New(e.cat, e.indexes, e.store, e.tbl.Identifier(), "pk", Options{
		Range: compactor.RangeWriterOptions{TargetFileSize: 1 << 10, RowGroupRows: 16}})
	ctx := context.Background()
	if _, err := align(ctx, u, nil); err != nil {
		t.Fatal(err)
	}
	step := func() int { return slowPathStep(t, u) }
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(5)}, []any{int64(150)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(5, 1), row(150, 1))
	if got := step(); got != 0 {
		t.Errorf("an upsert on the index key read %v data files in full; want the index to answer", got)
	}
	e.verifyCurrent("pk", 1)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(4)})
	got := step()
	e.verifyCurrent("pk", 2)
	if got == 0 {
		t.Error("an equality delete on a column the index does not lead with must take the slow path")
	}
}

// TestEqualityDeletesThroughAnotherIndex: by_customer (led by a bucket of
// customer_id) cannot resolve an upsert keyed on id itself; with pk
// published for the same source snapshot, its update resolves through pk
// and reads no data file in full; before pk has that snapshot (or with pk
// behind), it reads them. Both stay exact.
func TestEqualityDeletesThroughAnotherIndex(t *testing.T) {
	e := newEnv(t, 2)
	var rows [][]any
	for i := range int64(200) {
		rows = append(rows, row(i, 0))
	}
	tbl, _ := testtables.Append(t, e.tbl, rows[:100]...)
	tbl, _ = testtables.Append(t, tbl, rows[100:]...)
	ctx := context.Background()
	pk, byCustomer := e.updater("pk", PolicyEvery), e.updater("by_customer", PolicyEvery)
	for _, u := range []*Updater{pk, byCustomer} {
		if _, err := align(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	upsert := func(ids ...int64) {
		t.Helper()
		var keys [][]any
		var rows [][]any
		for _, id := range ids {
			keys = append(keys, []any{id})
			rows = append(rows, row(id, 1))
		}
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, keys...)
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
	}
	step := func(u *Updater) int { return slowPathStep(t, u) }
	// pk has an index snapshot of the source snapshot by_customer starts
	// from: by_customer resolves through it.
	upsert(5, 150)
	if got := step(byCustomer); got != 0 {
		t.Errorf("by_customer read %d data files in full with pk at its base; want pk to answer", got)
	}
	e.verifyCurrent("by_customer", 1)
	step(pk)
	e.verifyCurrent("pk", 1)
	// pk behind by_customer's base: no index answers, the files are read.
	upsert(7)
	step(byCustomer)
	upsert(8)
	if got := step(byCustomer); got == 0 {
		t.Error("by_customer read no data file in full, though no index has its base")
	}
	e.verifyCurrent("by_customer", 2)
}

// slowPathStep publishes u's update of the next commit and returns the data
// files it read in full to resolve equality deletes.
func slowPathStep(t *testing.T, u *Updater) int {
	t.Helper()
	st, err := u.Step(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Published == nil {
		t.Fatal("no index snapshot published for the new commit")
	}
	return st.Published.EqualitySlowPathFiles
}

// TestLatestSkipsToWhatAnotherIndexCovers: by_customer, which resolves
// upserts through pk, skips under policy latest to the newest snapshot pk
// has indexed rather than the newest, so that its next update resolves
// through pk again instead of reading the data files.
func TestLatestSkipsToWhatAnotherIndexCovers(t *testing.T) {
	e := newEnv(t, 2)
	var rows [][]any
	for i := range int64(100) {
		rows = append(rows, row(i, 0))
	}
	tbl, _ := testtables.Append(t, e.tbl, rows...)
	ctx := context.Background()
	pk, byCustomer := e.updater("pk", PolicyEvery), e.updater("by_customer", PolicyLatest)
	for _, u := range []*Updater{pk, byCustomer} {
		if _, err := align(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	upsert := func(id int64, version int) int64 {
		t.Helper()
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{id})
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(id, version))
		return tbl.CurrentSnapshot().SnapshotID
	}
	upsert(5, 1)
	if got := slowPathStep(t, byCustomer); got != 0 {
		t.Fatalf("by_customer read %d data files in full with pk at its base", got)
	}
	slowPathStep(t, pk)
	covered := upsert(6, 1)
	slowPathStep(t, pk)
	newest := upsert(7, 1)
	st, err := byCustomer.Step(ctx, nil)
	if err != nil || st.Published == nil {
		t.Fatalf("by_customer step: %v, published %v", err, st.Published)
	}
	if st.Published.SourceSnapshotID != covered {
		t.Errorf("by_customer skipped to snapshot %d; want %d, the newest pk covers (the newest is %d)", st.Published.SourceSnapshotID, covered, newest)
	}
	if got := slowPathStep(t, byCustomer); got != 0 {
		t.Errorf("the update after the skip read %d data files in full; want pk to answer", got)
	}
	slowPathStep(t, pk)
	e.verifyCurrent("by_customer", 1)
}
