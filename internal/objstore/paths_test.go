package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/format"
)

// TestRelativePathsResolveAgainstTheLocation: another writer's tracking
// file and range files named relative to the index location are found,
// and readers see full URIs; a path without a scheme that starts with /
// is ambiguous and refused.
func TestRelativePathsResolveAgainstTheLocation(t *testing.T) {
	ctx := context.Background()
	x := newStoredIndex(t)
	relative := make([]format.TrackingEntry, len(x.entries))
	for i, e := range x.entries {
		e.FilePath = strings.TrimPrefix(e.FilePath, x.md.Location+"/")
		if e.FilePath == x.entries[i].FilePath {
			t.Fatalf("range file %s is not under the location %s", e.FilePath, x.md.Location)
		}
		relative[i] = e
	}
	snap := x.snapshot(t, 7, relative, format.TrackingWriteOptions{})
	snap.TrackingFile = "metadata/snap-7.avro"
	tr, _, err := x.store.ReadTracking(ctx, x.md, snap, x.is)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range tr.Entries {
		if e.FilePath != x.entries[i].FilePath {
			t.Errorf("entry %d: %s, want the full URI %s", i, e.FilePath, x.entries[i].FilePath)
		}
		r, err := x.store.OpenRange(ctx, &tr.Entries[i], x.is, format.RangeFileReadOptions{})
		if err != nil {
			t.Fatalf("open range file %d: %v", i, err)
		}
		r.Close()
	}

	ambiguous := append([]format.TrackingEntry(nil), x.entries...)
	ambiguous[0].FilePath = strings.TrimPrefix(ambiguous[0].FilePath, "file://")
	bad := x.snapshot(t, 8, ambiguous, format.TrackingWriteOptions{})
	_, _, err = x.store.ReadTracking(ctx, x.md, bad, x.is)
	if !errors.Is(err, format.ErrAmbiguousPath) {
		t.Errorf("a range file path without a scheme: %v, want ErrAmbiguousPath", err)
	}
	wantCorruption(t, err, bad.TrackingFile, "has no URI scheme")
}

// TestFormatsAndEncryptionAreRefusedClearly: a range file in Avro or ORC,
// an encrypted range file and an encrypted tracking file are valid by the
// spec; streamidx cannot read them and says so, without calling them
// corrupt.
func TestFormatsAndEncryptionAreRefusedClearly(t *testing.T) {
	ctx := context.Background()
	x := newStoredIndex(t)
	for _, f := range []string{"PARQUET", "Parquet"} {
		te := x.entries[0]
		te.FileFormat = f
		r, err := x.store.OpenRange(ctx, &te, x.is, format.RangeFileReadOptions{})
		if err != nil {
			t.Fatalf("file_format %q: %v", f, err)
		}
		r.Close()
	}
	check := func(what string, err, want error, says string) {
		t.Helper()
		if !errors.Is(err, want) || format.IsCorruption(err) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want %v (not a corruption) saying %q", what, err, want, says)
		}
	}
	for _, f := range []string{"avro", "ORC"} {
		te := x.entries[0]
		te.FileFormat = f
		_, err := x.store.OpenRange(ctx, &te, x.is, format.RangeFileReadOptions{})
		check(f+" range file", err, format.ErrUnsupportedFileFormat, "streamidx reads Parquet range files only")
	}
	te := x.entries[0]
	te.KeyMetadata = []byte{1, 2, 3}
	_, err := x.store.OpenRange(ctx, &te, x.is, format.RangeFileReadOptions{})
	check("range file with key_metadata", err, format.ErrEncryptionNotSupported, "encryption is not supported")

	snap := x.snapshot(t, 9, x.entries, format.TrackingWriteOptions{})
	snap.KeyID = "k1"
	_, _, err = x.store.ReadTracking(ctx, x.md, snap, x.is)
	check("tracking file with key-id", err, format.ErrEncryptionNotSupported, "encryption is not supported")
}
