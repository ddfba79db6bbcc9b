package flush

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPublishWithAChosenSnapshotID: a snapshot id chosen before the commit
// (so that work for the next snapshot can be named after it) is the id the
// snapshot gets; an id another snapshot holds voids the commit with
// ErrBaseMoved and leaves the index as it was.
func TestPublishWithAChosenSnapshotID(t *testing.T) {
	f := newExpireFixture(t)
	first := f.publish(f.cat, time.Now(), f.rangeFile())
	id := NewSnapshotID(f.load())
	p := Publication{Table: f.table, Index: "pk", IndexUUID: f.md.IndexUUID, Schema: f.is, Entries: nil,
		SourceSnapshotID: 7, RequireBase: true, BaseSnapshotID: first.SnapshotID, SnapshotID: id}
	s, _, err := Publish(context.Background(), f.cat, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.SnapshotID != id || f.load().CurrentSnapshot().SnapshotID != id {
		t.Fatalf("published snapshot %d (current %d), want the chosen id %d", s.SnapshotID, f.load().CurrentSnapshot().SnapshotID, id)
	}
	p.BaseSnapshotID, p.SnapshotID = id, first.SnapshotID
	if _, _, err := Publish(context.Background(), f.cat, p, Options{}); !errors.Is(err, ErrBaseMoved) {
		t.Fatalf("publishing under a taken id: got %v, want ErrBaseMoved", err)
	}
	if md := f.load(); len(md.Snapshots) != 2 || md.CurrentSnapshot().SnapshotID != id {
		t.Errorf("a refused commit changed the index: snapshots %v", snapshotIDs(md))
	}
}
