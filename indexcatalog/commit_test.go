package indexcatalog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

func TestPrepareCommit(t *testing.T) {
	now := time.UnixMilli(1764400009999)
	base := &format.Metadata{IndexUUID: "u", LastUpdatedMs: 1764400000000}
	entry := func(f string) format.MetadataLogEntry {
		return format.MetadataLogEntry{MetadataFile: f, TimestampMs: 1}
	}
	for _, tc := range []struct {
		name        string
		log         []format.MetadataLogEntry
		props       map[string]string
		wantLog     []string
		wantTrimmed []string
		wantErr     bool
	}{
		// The logged names are relative to the index location, as another
		// writer may write them: the files to delete are resolved.
		{name: "first commit", wantLog: []string{"b"}},
		{name: "default keeps 100", log: []format.MetadataLogEntry{entry("x")}, wantLog: []string{"x", "b"}},
		{name: "trims oldest", log: []format.MetadataLogEntry{entry("x"), entry("y")},
			props: map[string]string{format.PropPreviousVersionsMax: "2"}, wantLog: []string{"y", "b"}, wantTrimmed: []string{"file:///w/i/x"}},
		{name: "limit below one keeps one", log: []format.MetadataLogEntry{entry("x")},
			props: map[string]string{format.PropPreviousVersionsMax: "0"}, wantLog: []string{"b"}, wantTrimmed: []string{"file:///w/i/x"}},
		{name: "base already logged", log: []format.MetadataLogEntry{entry("x"), entry("b")}, wantLog: []string{"x", "b"}},
		{name: "file still logged is not trimmed", log: []format.MetadataLogEntry{entry("x"), entry("y"), entry("x")},
			props: map[string]string{format.PropPreviousVersionsMax: "2"}, wantLog: []string{"x", "b"}, wantTrimmed: []string{"file:///w/i/y"}},
		{name: "bad limit", props: map[string]string{format.PropPreviousVersionsMax: "many"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := newIndex("file:///w/i")
			md.IndexUUID = "u"
			md.MetadataLog = tc.log
			md.Properties = tc.props
			before := slices.Clone(md.MetadataLog)
			p, err := prepareCommit(md, "b", base, now)
			if tc.wantErr {
				if err == nil {
					t.Error("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range p.md.MetadataLog {
				got = append(got, e.MetadataFile)
			}
			if !slices.Equal(got, tc.wantLog) || !slices.Equal(p.trimmed, tc.wantTrimmed) {
				t.Errorf("log %q trimmed %q, want %q and %q", got, p.trimmed, tc.wantLog, tc.wantTrimmed)
			}
			if last := p.md.MetadataLog[len(p.md.MetadataLog)-1]; len(tc.log) == 0 && last.TimestampMs != base.LastUpdatedMs {
				t.Errorf("base logged at %d, want its last-updated-ms %d", last.TimestampMs, base.LastUpdatedMs)
			}
			if p.md.LastUpdatedMs != now.UnixMilli() {
				t.Errorf("last-updated-ms %d, want %d", p.md.LastUpdatedMs, now.UnixMilli())
			}
			if !slices.Equal(md.MetadataLog, before) {
				t.Error("prepareCommit changed the caller's metadata")
			}
			parsed, err := format.ParseMetadata(p.data)
			if err != nil || len(parsed.MetadataLog) != len(tc.wantLog) || parsed.LastUpdatedMs != now.UnixMilli() {
				t.Errorf("written file does not hold the prepared metadata: %+v %v", parsed, err)
			}
		})
	}
	other := newIndex("file:///w/i")
	if _, err := prepareCommit(other, "b", base, now); err == nil {
		t.Error("metadata of another index-uuid accepted")
	}
}

func TestNewIdent(t *testing.T) {
	for _, tc := range []struct {
		table []string
		index string
		ok    bool
	}{
		{[]string{"sales", "orders"}, "by_customer", true},
		{[]string{"a", "b.c", "t"}, "x y", true},
		{[]string{"orders"}, "idx", false},
		{nil, "idx", false},
		{[]string{"", "orders"}, "idx", false},
		{[]string{"sales", "a/b"}, "idx", false},
		{[]string{"sales", ".."}, "idx", false},
		{[]string{"sales", "orders"}, "", false},
		{[]string{"sales", "orders"}, `a\b`, false},
		{[]string{"sales", "orders"}, ".", false},
	} {
		_, err := newIdent(tc.table, tc.index)
		if (err == nil) != tc.ok {
			t.Errorf("newIdent(%q, %q): %v, want ok=%t", tc.table, tc.index, err, tc.ok)
		}
	}
}

func TestLoadReportsUnsupportedAndCorruptFiles(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, _, location := b.open(t)
			vector := &format.Metadata{FormatVersion: 1, IndexUUID: "v", TableUUID: "t",
				Location: location(orders, "vec"), Type: format.TypeVector}
			vecLoc, err := cat.Create(ctx, orders, "vec", vector)
			if err != nil {
				t.Fatal(err)
			}
			md, loc, err := cat.Load(ctx, orders, "vec")
			if !errors.Is(err, format.ErrUnsupportedIndexType) || md == nil || md.IndexUUID != "v" || loc != vecLoc {
				t.Errorf("load of a VECTOR index: %v %v %s, want its metadata with ErrUnsupportedIndexType", md, err, loc)
			}

			loc, err = cat.Create(ctx, orders, "broken", newIndex(location(orders, "broken")))
			if err != nil {
				t.Fatal(err)
			}
			if err := files.Publish(ctx, loc, []byte(`{"format-version": 1`), objstore.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var corrupt *CorruptMetadataError
			_, _, err = cat.Load(ctx, orders, "broken")
			if !errors.As(err, &corrupt) || corrupt.Location != loc {
				t.Errorf("load of a truncated file: %v, want a CorruptMetadataError naming %s", err, loc)
			}
			if path, ok := format.CorruptPath(err); !format.IsCorruption(err) || !ok || path != loc {
				t.Errorf("load of a truncated file: %v is not marked as a corruption of %s (path %q)", err, loc, path)
			}
		})
	}
}

func TestClosedCatalog(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, _, location := b.open(t)
			for range 2 {
				if err := cat.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cat.Create(ctx, orders, "idx", newIndex(location(orders, "idx"))); !errors.Is(err, ErrClosed) {
				t.Errorf("create after close: %v", err)
			}
			if _, err := cat.List(ctx, orders); !errors.Is(err, ErrClosed) {
				t.Errorf("list after close: %v", err)
			}
		})
	}
}

// rewriteMetadata replaces text in a published metadata file, as a newer
// writer or damage would.
func rewriteMetadata(t *testing.T, loc, old, new string) {
	t.Helper()
	data, err := files.ReadFile(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not hold %s:\n%s", loc, old, data)
	}
	if err := files.Publish(context.Background(), loc, []byte(strings.Replace(string(data), old, new, 1)), objstore.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadValidatesMetadata(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, _, location := b.open(t)

			// A newer format version: refused by name, never written back.
			md := newIndex(location(orders, "newer"))
			addSnapshot(md, 1)
			loc, err := cat.Create(ctx, orders, "newer", md)
			if err != nil {
				t.Fatal(err)
			}
			rewriteMetadata(t, loc, `"format-version":1`, `"format-version":2`)
			files := metadataFiles(t, md.Location)
			_, _, err = cat.Load(ctx, orders, "newer")
			if !errors.Is(err, format.ErrUnknownFormatVersion) || format.IsCorruption(err) ||
				!strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), "format-version 2") {
				t.Errorf("load of a version 2 file: %v, want ErrUnknownFormatVersion naming %s and the version, not a corruption", err, loc)
			}
			_, _, err = CommitWithRetry(ctx, cat, orders, "newer", func(base *format.Metadata) (*format.Metadata, error) {
				t.Error("update called with metadata of an unknown version")
				return base, nil
			}, 3)
			if !errors.Is(err, format.ErrUnknownFormatVersion) {
				t.Errorf("commit on a version 2 file: %v, want ErrUnknownFormatVersion", err)
			}
			if _, err := cat.Commit(ctx, orders, "newer", loc, md); err == nil {
				t.Error("a commit on top of a version 2 file succeeded")
			}
			if got := metadataFiles(t, md.Location); !slices.Equal(got, files) {
				t.Errorf("refused commits wrote metadata files: %q, before %q", got, files)
			}
			newer := newIndex(location(orders, "newer2"))
			newer.FormatVersion = 2
			if _, err := cat.Create(ctx, orders, "newer2", newer); err == nil {
				t.Error("created an index of format version 2")
			}

			// A file that breaks a rule of the spec is a corruption.
			md = newIndex(location(orders, "broken"))
			addSnapshot(md, 1)
			loc, err = cat.Create(ctx, orders, "broken", md)
			if err != nil {
				t.Fatal(err)
			}
			rewriteMetadata(t, loc, `"cluster-spec":[1000,1]`, `"cluster-spec":[1000,77]`)
			var corrupt *CorruptMetadataError
			_, _, err = cat.Load(ctx, orders, "broken")
			if !errors.As(err, &corrupt) || corrupt.Location != loc || !errors.Is(err, format.ErrCorruption) || !errors.Is(err, format.ErrClusterUnknown) {
				t.Errorf("load of a file whose cluster-spec names an unknown field: %v, want a CorruptMetadataError naming %s", err, loc)
			}
			bad := newIndex(location(orders, "bad"))
			bad.ClusterSpec = nil
			if _, err := cat.Create(ctx, orders, "bad", bad); !errors.Is(err, format.ErrClusterEmpty) {
				t.Errorf("create of an index without cluster-spec: %v, want ErrClusterEmpty", err)
			}
		})
	}
}
