package indexcatalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

func newFS(t *testing.T) *FSCatalog {
	t.Helper()
	cat, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestFSCreateChoosesLocation(t *testing.T) {
	ctx := context.Background()
	cat := newFS(t)
	md := newIndex("")
	loc, err := cat.Create(ctx, orders, "idx", md)
	if err != nil {
		t.Fatal(err)
	}
	want := cat.root + "/sales/orders/indexes/idx"
	if !strings.HasPrefix(want, "file:///") || md.Location != want || loc != want+"/metadata/v1.metadata.json" {
		t.Errorf("created at %s with location %s, want %s/metadata/v1.metadata.json", loc, md.Location, want)
	}
	if got, _, err := cat.Load(ctx, orders, "idx"); err != nil || got.Location != want {
		t.Errorf("loaded location %v: %v", got, err)
	}
	elsewhere := newIndex(t.TempDir())
	if _, err := cat.Create(ctx, orders, "other", elsewhere); err == nil {
		t.Error("created an index whose location is outside the catalog")
	}
}

// TestFSStaleBaseAfterDeletedVersions commits on a base whose successors
// were trimmed and deleted: the successor's name is free again, and only
// the version check stops the stale writer from taking it.
func TestFSStaleBaseAfterDeletedVersions(t *testing.T) {
	ctx := context.Background()
	cat := newFS(t)
	md := newIndex("")
	md.Properties[format.PropPreviousVersionsMax] = "1"
	md.Properties[format.PropDeleteAfterCommit] = "true"
	if _, err := cat.Create(ctx, orders, "idx", md); err != nil {
		t.Fatal(err)
	}
	stale, base, err := cat.Load(ctx, orders, "idx")
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 4; id++ {
		commitSnapshot(t, cat, orders, "idx", id)
	}
	if files := metadataFiles(t, md.Location); !slices.Equal(files, []string{"v4.metadata.json", "v5.metadata.json"}) {
		t.Fatalf("metadata files %q, want v4 and v5", files)
	}
	addSnapshot(stale, 99)
	if _, err := cat.Commit(ctx, orders, "idx", base, stale); !errors.Is(err, ErrCommitConflict) {
		t.Errorf("commit on deleted base %s: %v, want ErrCommitConflict", base, err)
	}
	if got, loc, err := cat.Load(ctx, orders, "idx"); err != nil || objstore.Base(loc) != "v5.metadata.json" || len(got.Snapshots) != 4 {
		t.Errorf("current is %s with %d snapshots (%v), want v5 with 4", loc, len(got.Snapshots), err)
	}
	if exists(t, filepath.Join(md.Location, "metadata", "v2.metadata.json")) {
		t.Error("the stale writer re-created v2")
	}
}

func TestFSCommitRefusesForeignBase(t *testing.T) {
	ctx := context.Background()
	cat := newFS(t)
	for _, name := range []string{"a", "b"} {
		if _, err := cat.Create(ctx, orders, name, newIndex("")); err != nil {
			t.Fatal(err)
		}
	}
	md, _, err := cat.Load(ctx, orders, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, baseB, err := cat.Load(ctx, orders, "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{baseB, filepath.Join(md.Location, "metadata", "v01.metadata.json"), "v1.metadata.json"} {
		if _, err := cat.Commit(ctx, orders, "a", base, md); err == nil || errors.Is(err, ErrCommitConflict) {
			t.Errorf("commit on base %s: %v, want a non-conflict error", base, err)
		}
	}
}

func TestFSListSkipsDirectoriesWithoutVersions(t *testing.T) {
	ctx := context.Background()
	cat := newFS(t)
	if _, err := cat.Create(ctx, orders, "idx", newIndex("")); err != nil {
		t.Fatal(err)
	}
	root, ok := strings.CutPrefix(cat.root, "file://")
	if !ok {
		t.Fatalf("the catalog's root %q is not a local file URI", cat.root)
	}
	stray := filepath.Join(root, "sales", "orders", "indexes", "stray", "metadata")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".v1.metadata.json.1234.tmp", "v01.metadata.json", "00000-x.metadata.json"} {
		if err := os.WriteFile(filepath.Join(stray, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := cat.List(ctx, orders); err != nil || !slices.Equal(names, []string{"idx"}) {
		t.Errorf("list: %q %v, want [idx]", names, err)
	}
}

func TestNewFSRefusesStorageWithoutConditionalCreate(t *testing.T) {
	if _, err := NewFS("mem://bucket/indexes"); !errors.Is(err, objstore.ErrNoConditionalCreate) {
		t.Errorf("NewFS on mem://: %v, want the conditional-create error", err)
	}
}

func TestParseVersionName(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    int64
		ok   bool
	}{
		{"v1.metadata.json", 1, true},
		{"v42.metadata.json", 42, true},
		{"v0.metadata.json", 0, false},
		{"v01.metadata.json", 0, false},
		{"v.metadata.json", 0, false},
		{"v1.metadata.json.tmp", 0, false},
		{".v1.metadata.json.9f.tmp", 0, false},
		{"v-1.metadata.json", 0, false},
		{"v1a.metadata.json", 0, false},
		{"00001-9f.metadata.json", 0, false},
		{"v99999999999999999999.metadata.json", 0, false},
	} {
		v, ok := parseVersionName(tc.name)
		if v != tc.v || ok != tc.ok {
			t.Errorf("parseVersionName(%q) = %d, %t; want %d, %t", tc.name, v, ok, tc.v, tc.ok)
		}
	}
}
