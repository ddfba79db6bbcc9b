package format

import (
	"errors"
	"fmt"
	"testing"
)

func TestCorruptionMarker(t *testing.T) {
	plain := errors.New("connection refused")
	if IsCorruption(plain) || IsCorruption(nil) {
		t.Fatal("a storage error or nil is not a corruption")
	}
	if MarkCorruption("x", nil) != nil {
		t.Fatal("marking nil must give nil")
	}
	marked := fmt.Errorf("merge: %w", MarkCorruption("s3://b/r.parquet", errors.New("bad magic")))
	if !IsCorruption(marked) || !errors.Is(marked, ErrCorruption) {
		t.Fatalf("%v: not recognised as a corruption", marked)
	}
	if p, ok := CorruptPath(marked); !ok || p != "s3://b/r.parquet" {
		t.Fatalf("CorruptPath = %q, %v", p, ok)
	}
	if again := MarkCorruption("s3://b/r.parquet", marked); again != marked {
		t.Fatal("marking an error already marked for the same file must not wrap it again")
	}
	key := fmt.Errorf("decode: %w", ErrCorruptKey)
	if !IsCorruption(key) {
		t.Fatal("ErrCorruptKey is a corruption")
	}
	if _, ok := CorruptPath(key); ok {
		t.Fatal("a key error names no file")
	}
}
