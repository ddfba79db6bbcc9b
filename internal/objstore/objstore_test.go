package objstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCreatePublishesOnlyOnClose(t *testing.T) {
	ctx := context.Background()
	s := Local()
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "sub", "f.parquet")
	w, err := s.Create(ctx, loc, CreateOptions{})
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
	data, err := s.ReadFile(ctx, loc)
	if err != nil || string(data) != "hello" || w.Size() != 5 {
		t.Fatalf("read back %q %v (size %d)", data, err, w.Size())
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := s.Remove(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, loc); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read after remove: %v, want fs.ErrNotExist", err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := Local().Create(context.Background(), filepath.Join(dir, "g.avro"), CreateOptions{})
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

func TestExclusivePublishNeverReplaces(t *testing.T) {
	ctx := context.Background()
	s := Local()
	loc := filepath.Join(t.TempDir(), "metadata", "v1.metadata.json")
	if err := s.Publish(ctx, loc, []byte("first"), CreateOptions{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	err := s.Publish(ctx, loc, []byte("second"), CreateOptions{Exclusive: true})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second exclusive publish: %v, want fs.ErrExist", err)
	}
	if data, _ := s.ReadFile(ctx, loc); string(data) != "first" {
		t.Errorf("the file holds %q after a refused publish, want first", data)
	}
	entries, _ := os.ReadDir(filepath.Dir(loc))
	if len(entries) != 1 {
		t.Errorf("a refused publish left %v", entries)
	}
}

func TestObjectStorePublishAndExclusiveCreate(t *testing.T) {
	// iceberg-go's in-memory IO stands for an object store: a put is
	// atomic, and it cannot create a file only if it is absent.
	ctx := context.Background()
	s := Local()
	loc := "mem://objstore-test/idx/data/r.parquet"
	if err := s.Publish(ctx, loc, []byte("range"), CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, err := s.ReadFile(ctx, loc); err != nil || string(data) != "range" {
		t.Fatalf("read back %q, %v", data, err)
	}
	meta := "mem://objstore-test/idx/metadata/v1.metadata.json"
	if ok, err := s.CanCreateExclusive(ctx, meta); err != nil || ok {
		t.Fatalf("CanCreateExclusive = %t, %v; want false", ok, err)
	}
	_, err := s.Create(ctx, meta, CreateOptions{Exclusive: true})
	if !errors.Is(err, ErrNoConditionalCreate) {
		t.Errorf("exclusive create on an object store: %v, want ErrNoConditionalCreate", err)
	}
}
