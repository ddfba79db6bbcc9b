package itest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/testtables"
)

// Options tune the scenarios to a stack.
type Options struct {
	// Crashes is how many times StreamingWithCrashes kills the daemon.
	// Default: 5.
	Crashes int
}

// RunAll runs every scenario on stack, each as a subtest with parts of its
// own.
func RunAll(t *testing.T, stack Stack, o Options) {
	if o.Crashes <= 0 {
		o.Crashes = 5
	}
	t.Run("BuildAndVerify", func(t *testing.T) { BuildAndVerify(t, stack(t)) })
	t.Run("StreamingWithCrashes", func(t *testing.T) { StreamingWithCrashes(t, stack(t), o.Crashes) })
	t.Run("TwoDaemons", func(t *testing.T) { TwoDaemons(t, stack(t)) })
	t.Run("LaggingLookups", func(t *testing.T) { LaggingLookups(t, stack(t)) })
	t.Run("EqualityDeleteRewrite", func(t *testing.T) { EqualityDeleteRewrite(t, stack(t)) })
}

// EqualityDeleteRewrite commits upserts and equality deletes, each
// announced on the commit topic, while the daemon runs with
// --rewrite-deletes: after each commit the daemon must bring both indexes
// up to it, turn its equality delete into position deletes (the scenario's
// table is v2) through pk, and follow its own two snapshots. No equality
// delete may stay live, the live rows must be what the test committed
// (the rewrite moves no row), every source snapshot must have exactly one
// index snapshot, and every index snapshot must verify.
func EqualityDeleteRewrite(t *testing.T, p Parts) {
	s := newScenario(t, p)
	s.appendRows(0, 40, 0)
	s.appendRows(40, 80, 0)
	s.notify()
	s.createIndexes()
	s.startDaemon(t.TempDir(), "--rewrite-deletes")
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 6 {
		// The daemon writes the table too: each commit builds on what it
		// committed last, and waits for it to finish (rewrite-deletes
		// retries on a conflict, this test does not).
		s.reload()
		if i%3 == 2 {
			s.equalityDeletes(int64(r.IntN(s.next)))
		} else {
			s.upsert(1+r.IntN(5), int64(r.IntN(s.next)), int64(r.IntN(s.next)))
		}
		s.notify()
		s.waitRewritten()
	}
	s.checkHistory()
	for _, snap := range s.tbl.Metadata().Snapshots() {
		if snap.Summary != nil && snap.Summary.Properties["streamidx.rewrite-deletes"] == "true" {
			return
		}
	}
	t.Errorf("no snapshot of the table carries streamidx.rewrite-deletes: the daemon rewrote nothing")
}

// reload loads the table again: another writer (the daemon's
// rewrite-deletes) may have committed since the test's last commit.
func (s *scenario) reload() {
	s.t.Helper()
	tbl, err := s.cat.LoadTable(context.Background(), s.tbl.Identifier())
	if err != nil {
		s.t.Fatal(err)
	}
	s.tbl = tbl
}

// waitRewritten waits until the table's current snapshot holds no
// equality delete and both indexes cover it, then checks the lookups.
func (s *scenario) waitRewritten() {
	t := s.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s.reload()
		sum := s.tbl.CurrentSnapshot().Summary
		if sum != nil && sum.Properties["total-equality-deletes"] == "0" && s.indexesCover(s.tbl.CurrentSnapshot().SnapshotID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not rewrite the equality deletes of snapshot %d: summary %v", s.tbl.CurrentSnapshot().SnapshotID, sum)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.checkLookups(0)
}

// indexesCover reports whether both indexes have an index snapshot of
// table snapshot id.
func (s *scenario) indexesCover(id int64) bool {
	for _, index := range indexNames {
		var o inspectOutput
		_ = json.Unmarshal([]byte(s.cli.OK("inspect", "--table", s.table, "--index", index, "--json")), &o)
		if n := len(o.Snapshots); n == 0 || o.Snapshots[n-1].SourceTableSnapshotID != id {
			return false
		}
	}
	return true
}

// BuildAndVerify writes a table through every kind of commit an index must
// follow (appends, position deletes, equality deletes, an upsert, a
// rewrite), builds a primary-key and a bucketed secondary index, and checks
// them with verify and with lookups whose answers the test knows.
func BuildAndVerify(t *testing.T, p Parts) {
	s := newScenario(t, p)
	first := s.appendRows(0, 60, 0)
	second := s.appendRows(60, 100, 0)
	s.positionDeletes(first, 0, 3, 5, 8)
	s.positionDeletes(second, 60, 0, 39)
	s.equalityDeletes(10, 11, 70)
	s.upsert(1, 12, 71)
	s.appendRows(10, 11, 2) // a key deleted before: the old delete must not hide it
	s.rewrite(second, 60, 95, 3)
	s.createIndexes()
	for _, index := range indexNames {
		s.cli.OK("build", "--table", s.table, "--index", index)
		s.verify(index, "")
	}
	s.checkLookups(0)
}

// StreamingWithCrashes streams commits (appends, equality deletes, upserts),
// each announced on the commit topic, while the daemon keeps the indexes
// fresh and is killed with SIGKILL at random moments, crashes times. After
// a last restart it must catch up, every source snapshot from the first
// indexed one on must have exactly one index snapshot, every index snapshot
// must verify, and lookups must be exact.
func StreamingWithCrashes(t *testing.T, p Parts, crashes int) {
	s := newScenario(t, p)
	s.appendRows(0, 60, 0)
	s.notify()
	s.createIndexes()
	stageDir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	for range crashes {
		d := s.startDaemon(stageDir)
		for range 1 + r.IntN(3) {
			s.randomCommit(r)
			s.notify()
		}
		time.Sleep(time.Duration(r.IntN(600)) * time.Millisecond)
		d.Kill()
	}
	s.startDaemon(stageDir)
	s.checkHistory()
	s.checkLookups(0)
}

// TwoDaemons runs two daemons on the same indexes, the same commit topic
// and the same consumer group while commits stream in: the index catalog's
// compare-and-swap decides every commit, nothing is lost or doubled.
func TwoDaemons(t *testing.T, p Parts) {
	s := newScenario(t, p)
	s.appendRows(0, 60, 0)
	s.notify()
	s.createIndexes()
	s.startDaemon(t.TempDir())
	s.startDaemon(t.TempDir())
	r := rand.New(rand.NewPCG(5, 6))
	for range 15 {
		s.randomCommit(r)
		s.notify()
		time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
	}
	s.checkHistory()
	s.checkLookups(0)
}

// LaggingLookups builds the indexes, then commits behind their back
// (appends, position and equality deletes, an upsert, a rewrite) without a
// daemon: lookups at the table's current snapshot must still be exact,
// through the index snapshot that lags and the changes since.
func LaggingLookups(t *testing.T, p Parts) {
	s := newScenario(t, p)
	first := s.appendRows(0, 80, 0)
	s.createIndexes()
	for _, index := range indexNames {
		s.cli.OK("build", "--table", s.table, "--index", index)
	}
	s.appendRows(80, 120, 0)
	s.positionDeletes(first, 0, 1, 2, 40)
	s.equalityDeletes(7, 81)
	s.upsert(1, 9, 82)
	s.rewrite(first, 0, 60, 2)
	s.checkLookups(5)
}

// indexNames are the indexes every scenario creates.
var indexNames = []string{"pk", "by_customer"}

var definitions = map[string]string{
	"pk": `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	"by_customer": `{"name":"by_customer","identity":["customer_id","id"],"materialized":["_file","_pos","name"],` +
		`"non-materialized":["bucket(8, customer_id)"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`,
}

// scenario is one table on a stack, its commit topic, and what the test
// knows the table holds: one live row per id at most.
type scenario struct {
	t        *testing.T
	p        Parts
	cat      catalog.Catalog
	tbl      *table.Table
	table    string // namespace.name, for the command line
	topic    string
	cli      *CLI
	producer *kgo.Client
	daemons  []*Daemon
	live     map[int64]liveRow
	next     int // the lowest id never written
}

// liveRow is what the test knows of a live row: the variant of
// testtables.OrderRow it was written as, and its data file.
type liveRow struct {
	variant int
	file    string
}

func newScenario(t *testing.T, p Parts) *scenario {
	t.Helper()
	// Names of their own let scenarios share servers (a Postgres database,
	// a Kafka cluster, a REST catalog).
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	s := &scenario{t: t, p: p, cat: openCatalog(t, p), live: map[int64]liveRow{},
		topic: "streamidx-commits-" + suffix}
	s.tbl = testtables.CreateTable(t, s.cat, testtables.TableConfig{
		Name: "orders_" + suffix, Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16,
	})
	s.table = testtables.Namespace + ".orders_" + suffix
	s.cli = newCLI(t, p, "streamidx-"+suffix)
	if len(p.Kafka) > 0 {
		producer, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka...), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(producer.Close)
		s.producer = producer
	}
	return s
}

func (s *scenario) createIndexes() {
	dir := s.t.TempDir()
	for _, name := range indexNames {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(definitions[name]), 0o644); err != nil {
			s.t.Fatal(err)
		}
		s.cli.OK("create", "--table", s.table, "--def", path)
	}
}

// appendRows commits orders [from, to) in variant as one data file, whose
// row i is order from+i.
func (s *scenario) appendRows(from, to, variant int) iceberg.DataFile {
	tbl, files := testtables.Append(s.t, s.tbl, testtables.OrderRows(from, to, variant)...)
	s.tbl = tbl
	for id := from; id < to; id++ {
		s.live[int64(id)] = liveRow{variant, files[0].FilePath()}
	}
	s.next = max(s.next, to)
	return files[0]
}

// positionDeletes deletes rows of file, whose row 0 is order first.
func (s *scenario) positionDeletes(file iceberg.DataFile, first int, pos ...int64) {
	s.tbl, _ = testtables.AddPositionDeletes(s.t, s.tbl, testtables.Positions{File: file, Pos: pos})
	for _, p := range pos {
		if id := int64(first) + p; s.live[id].file == file.FilePath() {
			delete(s.live, id)
		}
	}
}

func (s *scenario) equalityDeletes(ids ...int64) {
	rows := make([][]any, len(ids))
	for i, id := range ids {
		rows[i] = []any{id}
		delete(s.live, id)
	}
	s.tbl = testtables.AddEqualityDeletes(s.t, s.tbl, []int{1}, rows...)
}

// upsert replaces orders by an equality delete and the new rows in one
// commit, as a CDC sink in upsert mode does.
func (s *scenario) upsert(variant int, ids ...int64) {
	keys := make([][]any, len(ids))
	rows := make([][]any, len(ids))
	for i, id := range ids {
		keys[i] = []any{id}
		rows[i] = testtables.OrderRow(int(id), variant)
	}
	del := testtables.WriteEqualityDeleteFile(s.t, s.tbl, 0, nil, []int{1}, keys...)
	var files []iceberg.DataFile
	s.tbl, files = testtables.AppendAndDelete(s.t, s.tbl, []iceberg.DataFile{del}, rows...)
	for _, id := range ids {
		s.live[id] = liveRow{variant, files[0].FilePath()}
	}
}

// rewrite replaces file with the orders [from, to) in variant that are not
// live in another file, as an overwrite does.
func (s *scenario) rewrite(file iceberg.DataFile, from, to, variant int) {
	for id, r := range s.live {
		if r.file == file.FilePath() {
			delete(s.live, id)
		}
	}
	var rows [][]any
	var ids []int64
	for id := from; id < to; id++ {
		if _, elsewhere := s.live[int64(id)]; !elsewhere {
			rows = append(rows, testtables.OrderRow(id, variant))
			ids = append(ids, int64(id))
		}
	}
	var files []iceberg.DataFile
	s.tbl, files = testtables.Rewrite(s.t, s.tbl, []iceberg.DataFile{file}, rows...)
	for _, id := range ids {
		s.live[id] = liveRow{variant, files[0].FilePath()}
	}
	s.next = max(s.next, to)
}

// randomCommit makes one commit of the kinds a CDC table sees.
func (s *scenario) randomCommit(r *rand.Rand) {
	switch r.IntN(3) {
	case 0:
		s.appendRows(s.next, s.next+5, 0)
	case 1:
		s.equalityDeletes(int64(r.IntN(s.next)))
	default:
		s.upsert(1+r.IntN(5), int64(r.IntN(s.next)))
	}
}

// notify announces the table's current snapshot on the commit topic.
func (s *scenario) notify() {
	if s.producer == nil {
		return
	}
	snap := s.tbl.CurrentSnapshot()
	v := fmt.Sprintf(`{"table":%q,"snapshot-id":%d,"sequence-number":%d,"timestamp-ms":%d}`,
		s.table, snap.SnapshotID, snap.SequenceNumber, snap.TimestampMs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.producer.ProduceSync(ctx, &kgo.Record{Topic: s.topic, Value: []byte(v)}).FirstErr(); err != nil {
		s.t.Fatalf("produce commit notification: %v", err)
	}
}

// startDaemon starts `streamidx run` for both indexes, fed by the commit
// topic when the stack has Kafka, polling the catalog every 100ms as well.
func (s *scenario) startDaemon(stageDir string, extra ...string) *Daemon {
	args := append([]string{"--poll-interval", "100ms", "--http", "none", "--stage-dir", stageDir}, extra...)
	for _, index := range indexNames {
		args = append(args, "--table", s.table, "--index", index)
	}
	if len(s.p.Kafka) > 0 {
		args = append(args, "--kafka-brokers", strings.Join(s.p.Kafka, ","), "--commit-topic", s.topic)
	}
	d := s.cli.StartDaemon(args...)
	s.daemons = append(s.daemons, d)
	return d
}

func (s *scenario) verify(index, snapshot string) {
	s.t.Helper()
	args := []string{"verify", "--table", s.table, "--index", index}
	if snapshot != "" {
		args = append(args, "--snapshot", snapshot)
	}
	if code, out, errs := s.cli.Run(args...); code != 0 {
		s.t.Errorf("index %s snapshot %q does not verify: exit %d\n%s%s", index, snapshot, code, out, errs)
	}
}

type inspectOutput struct {
	Snapshots []struct {
		SnapshotID            int64 `json:"snapshot_id"`
		SourceTableSnapshotID int64 `json:"source_table_snapshot_id"`
	} `json:"snapshots"`
}

// checkHistory waits until both indexes cover the table's current snapshot
// and stops the daemons, then checks that every source snapshot from the
// first indexed one on has exactly one index snapshot and that every index
// snapshot verifies.
func (s *scenario) checkHistory() {
	t := s.t
	t.Helper()
	want := s.tbl.CurrentSnapshot().SnapshotID
	var all []int64 // the table's history is one line: every snapshot in order
	for _, snap := range s.tbl.Metadata().Snapshots() {
		all = append(all, snap.SnapshotID)
	}
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for _, index := range indexNames {
		for {
			var o inspectOutput
			_ = json.Unmarshal([]byte(s.cli.OK("inspect", "--table", s.table, "--index", index, "--json")), &o)
			if n := len(o.Snapshots); n > 0 && o.Snapshots[n-1].SourceTableSnapshotID == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("index %s did not catch up with snapshot %d: %+v", index, want, o.Snapshots)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("caught up in %v", time.Since(start).Round(time.Millisecond))
	// Nothing is left to do; the daemons would only compete with verify.
	for _, d := range s.daemons {
		d.Kill()
	}
	for _, index := range indexNames {
		start := time.Now()
		var o inspectOutput
		if err := json.Unmarshal([]byte(s.cli.OK("inspect", "--table", s.table, "--index", index, "--json")), &o); err != nil {
			t.Fatal(err)
		}
		// The first build indexes whatever snapshot is current when a
		// daemon first starts; from there on, every source snapshot counts.
		first := slices.Index(all, o.Snapshots[0].SourceTableSnapshotID)
		if first < 0 {
			t.Fatalf("index %s starts at snapshot %d, which is not in the table's history", index, o.Snapshots[0].SourceTableSnapshotID)
		}
		perSource := map[int64]int{}
		for _, snap := range o.Snapshots {
			perSource[snap.SourceTableSnapshotID]++
			s.verify(index, fmt.Sprint(snap.SnapshotID))
		}
		for _, src := range all[first:] {
			if perSource[src] != 1 {
				t.Errorf("index %s: source snapshot %d has %d index snapshots, want 1", index, src, perSource[src])
			}
		}
		if len(o.Snapshots) != len(all[first:]) {
			t.Errorf("index %s has %d snapshots for %d source snapshots", index, len(o.Snapshots), len(all[first:]))
		}
		t.Logf("index %s: %d snapshots verified in %v", index, len(o.Snapshots), time.Since(start).Round(time.Millisecond))
	}
}

// checkLookups asks both indexes questions whose answers the test knows,
// at the table's current snapshot. behind is how many table commits the
// index snapshot the lookups use must lag (0: it must be current).
func (s *scenario) checkLookups(behind int) {
	t := s.t
	t.Helper()
	var ids []string
	for id := range int64(s.next + 3) {
		if id%3 == 0 || id < 15 {
			ids = append(ids, fmt.Sprint(id))
		}
	}
	rows, plan := s.lookup("pk", "id IN ("+strings.Join(ids, ", ")+")")
	var want []int64
	for id := range int64(s.next + 3) {
		if _, ok := s.live[id]; ok && (id%3 == 0 || id < 15) {
			want = append(want, id)
		}
	}
	if got := idsOf(t, rows); !slices.Equal(got, want) {
		t.Errorf("pk lookup of %d keys: ids %v, want %v", len(ids), got, want)
	}
	if plan.CommitsBehind != behind {
		t.Errorf("pk lookup used an index snapshot %d commits behind the table, want %d", plan.CommitsBehind, behind)
	}

	for _, customer := range []int64{0, 3} {
		rows, plan := s.lookup("by_customer", fmt.Sprintf("customer_id = %d", customer))
		want = want[:0]
		for id, r := range s.live {
			if c := testtables.OrderRow(int(id), r.variant)[1]; c == customer {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		if got := idsOf(t, rows); !slices.Equal(got, want) {
			t.Errorf("by_customer lookup of customer %d: ids %v, want %v", customer, got, want)
		}
		for _, r := range rows {
			id, _ := r["id"].(json.Number).Int64()
			if wantName := testtables.OrderRow(int(id), s.live[id].variant)[2]; r["name"] != wantName {
				t.Errorf("by_customer: order %d has name %v, want %v (variant %d)", id, r["name"], wantName, s.live[id].variant)
			}
		}
		if plan.CommitsBehind != behind {
			t.Errorf("by_customer lookup used an index snapshot %d commits behind the table, want %d", plan.CommitsBehind, behind)
		}
	}
}

type lookupPlan struct {
	CommitsBehind   int   `json:"commits_behind"`
	TableSnapshotID int64 `json:"table_snapshot_id"`
}

// lookup runs `lookup --json --explain` and returns the rows and the plan.
// A lookup of a current index is asked again at its table snapshot of a
// streamidx without an engine: it must answer alone, and alike.
func (s *scenario) lookup(index, where string) ([]map[string]any, lookupPlan) {
	s.t.Helper()
	out := s.cli.OK("lookup", "--table", s.table, "--index", index, "--where", where, "--json", "--explain")
	rows, plan := s.parseLookup(out)
	if plan.CommitsBehind == 0 {
		code, again, errs := s.cli.RunWith(s.cli.NoEngine(), "lookup", "--table", s.table, "--index", index, "--where", where,
			"--json", "--snapshot", strconv.FormatInt(plan.TableSnapshotID, 10))
		if code != 0 {
			s.t.Fatalf("lookup of a current index by streamidx alone: exit %d\n%s", code, errs)
		}
		if alone, _ := s.parseLookup(again); fmt.Sprint(alone) != fmt.Sprint(rows) {
			s.t.Errorf("lookup of a current index by streamidx alone: %d rows, with the engine at hand %d", len(alone), len(rows))
		}
	}
	return rows, plan
}

// parseLookup reads the rows and the plan of `lookup --json [--explain]`.
func (s *scenario) parseLookup(out string) ([]map[string]any, lookupPlan) {
	s.t.Helper()
	var rows []map[string]any
	var plan lookupPlan
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		if strings.HasPrefix(sc.Text(), `{"explain":`) {
			var x struct {
				Explain struct {
					Plan lookupPlan `json:"plan"`
				} `json:"explain"`
			}
			if err := dec.Decode(&x); err != nil {
				s.t.Fatal(err)
			}
			plan = x.Explain.Plan
			continue
		}
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			s.t.Fatalf("lookup output line %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows, plan
}

func idsOf(t *testing.T, rows []map[string]any) []int64 {
	t.Helper()
	var ids []int64
	for _, r := range rows {
		n, ok := r["id"].(json.Number)
		if !ok {
			t.Fatalf("lookup row without an id: %v", r)
		}
		id, err := n.Int64()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
