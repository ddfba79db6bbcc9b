package workload

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestStreamCommitsUpsertsAndNotifies: a stream of three commits upserts its
// orders with an equality delete each, keeps the number of live orders,
// and announces every commit, in order, with a native notification that
// names the table and the snapshot.
func TestStreamCommitsUpsertsAndNotifies(t *testing.T) {
	cat, _ := testtables.NewCatalog(t)
	ctx := context.Background()
	ident := table.Identifier{"w", "orders"}
	tbl, err := CreateOrders(ctx, cat, ident, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = Append(ctx, tbl, 0, 100, 0, 1); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "commits"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var seen []int
	commits, err := Stream(ctx, tbl, StreamOptions{Rows: 100, Upserts: 10, Pattern: "uniform", Interval: 10 * time.Millisecond, Commits: 3,
		Notify: KafkaNotifier(producer, "commits"), OnCommit: func(c Commit) { seen = append(seen, c.N) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 3 || !slices.Equal(seen, []int{1, 2, 3}) {
		t.Fatalf("%d commits, reported %v", len(commits), seen)
	}
	tbl, err = cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commits {
		s := tbl.SnapshotByID(c.SnapshotID)
		if s == nil || s.Summary.Properties["added-equality-deletes"] != "10" || s.Summary.Properties["added-records"] != "10" {
			t.Errorf("commit %d: snapshot %v does not upsert 10 orders", c.N, s)
		}
	}
	if got := tbl.CurrentSnapshot().SnapshotID; got != commits[2].SnapshotID {
		t.Errorf("the table's current snapshot %d is not the stream's last commit", got)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("commits"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	type note struct {
		Table      string `json:"table"`
		SnapshotID int64  `json:"snapshot-id"`
	}
	var notes []note
	for len(notes) < 3 {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var n note
			if err := json.Unmarshal(r.Value, &n); err != nil {
				t.Fatal(err)
			}
			notes = append(notes, n)
		})
	}
	for i, n := range notes {
		if n.Table != strings.Join(ident, ".") || n.SnapshotID != commits[i].SnapshotID {
			t.Errorf("notification %d: %v, want snapshot %d of w.orders", i, n, commits[i].SnapshotID)
		}
	}
}

// TestStreamWithAnotherWriter: with Reload, a stream whose table another
// writer commits to between its commits, and once between loading the
// table and committing on it, makes every commit on top of the other
// writer's: the head's ancestry holds all of both writers' snapshots.
func TestStreamWithAnotherWriter(t *testing.T) {
	cat, _ := testtables.NewCatalog(t)
	ctx := context.Background()
	ident := table.Identifier{"w", "orders"}
	tbl, err := CreateOrders(ctx, cat, ident, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = Append(ctx, tbl, 0, 100, 0, 1); err != nil {
		t.Fatal(err)
	}
	var others []int64
	other := func() {
		t.Helper()
		cur, err := cat.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		from := 100 + int64(len(others))*10
		next, err := Append(ctx, cur, from, from+10, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, next.CurrentSnapshot().SnapshotID)
	}
	loads := 0
	commits, err := Stream(ctx, tbl, StreamOptions{Rows: 100, Upserts: 10, Interval: 10 * time.Millisecond, Commits: 3,
		Reload: func(ctx context.Context) (*table.Table, error) {
			loads++
			cur, err := cat.LoadTable(ctx, ident)
			if loads == 2 {
				other() // commits after this load: the stream's commit on cur fails and is made again
			}
			return cur, err
		},
		Notify: func(context.Context, *table.Table, Commit) error { other(); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 3 {
		t.Fatalf("%d commits, want 3", len(commits))
	}
	tbl, err = cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	lineage := map[int64]bool{}
	for s := tbl.CurrentSnapshot(); s != nil; {
		lineage[s.SnapshotID] = true
		if s.ParentSnapshotID == nil {
			break
		}
		s = tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	for _, c := range commits {
		if !lineage[c.SnapshotID] {
			t.Errorf("stream commit %d (snapshot %d) is not in the head's ancestry", c.N, c.SnapshotID)
		}
	}
	if len(others) != 4 {
		t.Fatalf("the other writer committed %d times, want 4", len(others))
	}
	for _, id := range others {
		if !lineage[id] {
			t.Errorf("the other writer's snapshot %d is not in the head's ancestry", id)
		}
	}
}
