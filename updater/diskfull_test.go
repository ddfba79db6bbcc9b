package updater

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/staging"
)

// lowDisk is the real file system, reporting as free what the test says
// (when free is not negative).
type lowDisk struct {
	vfs.FS
	free atomic.Int64
}

func (d *lowDisk) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := d.FS.GetDiskUsage(path)
	if f := d.free.Load(); f >= 0 {
		u.AvailBytes = uint64(f)
	}
	return u, err
}

func TestStepHaltsOnAFullStagingDiskAndResumes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2)
	disk := &lowDisk{FS: vfs.Default}
	disk.free.Store(-1)
	store, err := staging.OpenStore(t.TempDir(), staging.StoreOptions{NoSync: true, FS: disk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e.store = store
	u := e.updater("pk", PolicyEvery)
	tbl, _ := testtables.Append(t, e.tbl, testtables.OrderRows(0, 40, 0)...)
	if _, err := u.Step(ctx, nil); err != nil {
		t.Fatal(err)
	}
	testtables.Append(t, tbl, testtables.OrderRows(40, 60, 0)...)
	before, _, err := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
	if err != nil {
		t.Fatal(err)
	}

	disk.free.Store(4 << 10)
	st, err := u.Step(ctx, nil)
	if st.Published != nil || !errors.Is(err, staging.ErrDiskFull) {
		t.Fatalf("step with a full staging disk: published %+v, %v; want none and staging.ErrDiskFull", st.Published, err)
	}
	after, _, err := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
	if err != nil || after.CurrentSnapshot().SnapshotID != before.CurrentSnapshot().SnapshotID {
		t.Fatalf("the index moved while staging was full: %v", err)
	}

	disk.free.Store(-1)
	if st, err := u.Step(ctx, nil); st.Published == nil || err != nil {
		t.Fatalf("step once space returned: published %+v, %v; want one snapshot", st.Published, err)
	}
	e.verifyCurrent("pk", 2)
}
