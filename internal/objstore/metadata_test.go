package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamidx/streamidx/format"
)

// TestMetadataParsesAFileOnce: the store parses an index metadata file the
// first time it is asked for it, hands out copies a caller may change, and
// keeps nothing that failed to parse.
func TestMetadataParsesAFileOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "00001-a.metadata.json")
	if err := os.WriteFile(path, []byte(`{"n": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Local()
	parses := 0
	parse := func(data []byte) (*format.Metadata, error) {
		parses++
		return &format.Metadata{Location: string(data), Properties: map[string]string{"k": "v"}, Snapshots: []format.Snapshot{{SnapshotID: 7}}}, nil
	}
	first, err := s.Metadata(ctx, "file://"+path, parse)
	if err != nil {
		t.Fatal(err)
	}
	first.Properties["k"] = "changed"
	first.Snapshots[0].SnapshotID = 8
	second, err := s.Metadata(ctx, path, parse) // the same file, named as a path
	if err != nil {
		t.Fatal(err)
	}
	if parses != 1 {
		t.Errorf("parsed %d times, want once", parses)
	}
	if second.Properties["k"] != "v" || second.Snapshots[0].SnapshotID != 7 || second.Location != `{"n": 1}` {
		t.Errorf("second read %+v: a change to the first copy reached it", second)
	}

	bad := filepath.Join(filepath.Dir(path), "00002-b.metadata.json")
	if err := os.WriteFile(bad, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("refused")
	fails := 0
	for range 2 {
		if _, err := s.Metadata(ctx, bad, func([]byte) (*format.Metadata, error) { fails++; return nil, refuse }); !errors.Is(err, refuse) {
			t.Fatalf("got %v, want the parser's error", err)
		}
	}
	if fails != 2 {
		t.Errorf("a file that failed to parse was parsed %d times in two reads, want 2: a failure was kept", fails)
	}
	if _, err := s.Metadata(ctx, filepath.Join(filepath.Dir(path), "missing.json"), parse); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}
