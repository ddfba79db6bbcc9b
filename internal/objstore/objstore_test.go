package objstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestCreatePublishesOnlyOnClose(t *testing.T) {
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "sub", "f.parquet")
	w, err := Create(context.Background(), nil, loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "f.parquet")); !os.IsNotExist(err) {
		t.Fatalf("file visible before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := ReadFile(context.Background(), nil, loc)
	if err != nil || string(data) != "hello" || w.Size() != 5 {
		t.Fatalf("read back %q %v (size %d)", data, err, w.Size())
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := Remove(context.Background(), nil, loc); err != nil {
		t.Fatal(err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(context.Background(), nil, filepath.Join(dir, "g.avro"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("partial"))
	w.Abort()
	w.Abort()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("abort left %v", entries)
	}
}
