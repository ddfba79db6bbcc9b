package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/streamidx/streamidx/internal/testservers"
)

// newS3 returns a prefix of its own on the S3 server of make itest.
func newS3(t *testing.T) testservers.S3 {
	t.Helper()
	s3, ok := testservers.NewS3(t)
	if !ok {
		t.Skip("no S3 server configured (make itest starts SeaweedFS)")
	}
	return s3
}

func TestObjectStoreFiles(t *testing.T) {
	s3 := newS3(t)
	ctx := context.Background()
	s := New(Options{IOProperties: s3.Props})
	idx := Join(s3.Root, "sales", "orders", "indexes", "pk")
	for _, f := range []string{"data/r1.parquet", "data/r2.parquet", "metadata/v1.metadata.json"} {
		if err := s.Publish(ctx, Join(idx, f), []byte(f), CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := s.ReadFile(ctx, Join(idx, "data/r2.parquet")); err != nil || string(data) != "data/r2.parquet" {
		t.Fatalf("read back %q, %v", data, err)
	}
	if ok, err := s.CanCreateExclusive(ctx, idx); err != nil || !ok {
		t.Errorf("CanCreateExclusive on S3 = %t, %v; want true", ok, err)
	}

	entries, err := s.ReadDir(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s dir=%t", e.Name(), e.IsDir()))
	}
	if want := []string{"data dir=true", "metadata dir=true"}; !slices.Equal(got, want) {
		t.Errorf("ReadDir(index) = %q, want %q", got, want)
	}
	entries, err = s.ReadDir(ctx, Join(idx, "data"))
	if err != nil || len(entries) != 2 || entries[0].Name() != "r1.parquet" || entries[0].IsDir() {
		t.Errorf("ReadDir(data) = %v, %v; want r1.parquet and r2.parquet", entries, err)
	} else if info, err := entries[1].Info(); err != nil || info.Size() != int64(len("data/r2.parquet")) {
		t.Errorf("size of r2.parquet: %v, %v", info, err)
	}
	if entries, err := s.ReadDir(ctx, Join(idx, "missing")); err != nil || len(entries) != 0 {
		t.Errorf("ReadDir of a missing directory = %v, %v; want empty", entries, err)
	}
	walked, err := s.Walk(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	var locs []string
	for _, f := range walked {
		locs = append(locs, f.Location)
	}
	slices.Sort(locs)
	if want := []string{Join(idx, "data/r1.parquet"), Join(idx, "data/r2.parquet"), Join(idx, "metadata/v1.metadata.json")}; !slices.Equal(locs, want) {
		t.Errorf("Walk = %q, want %q", locs, want)
	}

	// An aborted upload never appears, and does not delete what is there.
	w, err := s.Create(ctx, Join(idx, "data/r3.parquet"), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("partial"))
	w.Abort()
	if _, err := s.ReadFile(ctx, Join(idx, "data/r3.parquet")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("aborted upload: %v, want fs.ErrNotExist", err)
	}
	w, err = s.Create(ctx, Join(idx, "metadata/v1.metadata.json"), CreateOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("loser"))
	w.Abort()
	if data, err := s.ReadFile(ctx, Join(idx, "metadata/v1.metadata.json")); err != nil || string(data) != "metadata/v1.metadata.json" {
		t.Errorf("after an aborted exclusive create the file holds %q, %v", data, err)
	}

	if err := s.Remove(ctx, Join(idx, "data/r1.parquet")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, Join(idx, "data/r1.parquet")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read after remove: %v, want fs.ErrNotExist", err)
	}
}

// TestObjectStoreExclusiveCreateRace lets two writers, each with a client
// of its own as two processes would have, create the same new key at the
// same moment, 20 times: every time exactly one wins, the other gets
// fs.ErrExist, and the object holds the winner's bytes.
func TestObjectStoreExclusiveCreateRace(t *testing.T) {
	s3 := newS3(t)
	ctx := context.Background()
	writers := []*Store{New(Options{IOProperties: s3.Props}), New(Options{IOProperties: s3.Props})}
	for round := range 20 {
		loc := Join(s3.Root, "metadata", fmt.Sprintf("v%d.metadata.json", round+1))
		// Both uploads are open before either completes.
		ws := make([]*Writer, len(writers))
		for i, s := range writers {
			w, err := s.Create(ctx, loc, CreateOptions{Exclusive: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(w, "writer %d", i); err != nil {
				t.Fatal(err)
			}
			ws[i] = w
		}
		errs := make([]error, len(ws))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				<-start
				errs[i] = w.Close()
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both created %s", round, winner, i, loc)
			case err == nil:
				winner = i
			case !errors.Is(err, fs.ErrExist):
				t.Fatalf("round %d: writer %d: %v, want success or fs.ErrExist", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s: %v", round, loc, errs)
		}
		if data, err := writers[0].ReadFile(ctx, loc); err != nil || string(data) != fmt.Sprintf("writer %d", winner) {
			t.Fatalf("round %d: %s holds %q (%v), want writer %d's bytes", round, loc, data, err, winner)
		}
	}
}
