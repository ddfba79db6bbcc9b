package objstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCached: callers that miss together make a value once; a failed make
// is not kept; the byte bound evicts the least recently used; a store
// without a lookup cache makes every time.
func TestCached(t *testing.T) {
	s := New(Options{LookupCacheBytes: 100})
	var made atomic.Int32
	slow := func(context.Context) (string, int64, error) {
		made.Add(1)
		time.Sleep(50 * time.Millisecond)
		return "v", 10, nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if v, err := Cached(t.Context(), s, "f1", "k", slow); err != nil || v != "v" {
				t.Errorf("Cached = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := made.Load(); n != 1 {
		t.Errorf("8 concurrent misses made the value %d times, want 1", n)
	}

	boom := errors.New("boom")
	if _, err := Cached(t.Context(), s, "f1", "bad", func(context.Context) (int, int64, error) { return 0, 1, boom }); !errors.Is(err, boom) {
		t.Errorf("failed make: %v", err)
	}
	if _, err := Cached(t.Context(), s, "f1", "bad", func(context.Context) (int, int64, error) { return 7, 1, nil }); err != nil {
		t.Errorf("make after a failure: %v", err)
	}
	// 10 + 1 bytes held; two values of 45 fit, a third evicts the oldest.
	for _, k := range []string{"a", "b", "c"} {
		if _, err := Cached(t.Context(), s, "f2", k, func(context.Context) (int, int64, error) { return 1, 45, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.CacheStats().Lookup; st.Bytes > 100 {
		t.Errorf("cache holds %d bytes over its bound of 100", st.Bytes)
	}
	made.Store(0)
	if _, err := Cached(t.Context(), s, "f1", "k", slow); err != nil || made.Load() != 1 {
		t.Errorf("the least recently used value was not evicted (made %d, %v)", made.Load(), err)
	}

	none := New(Options{})
	made.Store(0)
	for range 3 {
		if _, err := Cached(t.Context(), none, "f", "k", slow); err != nil {
			t.Fatal(err)
		}
	}
	if made.Load() != 3 {
		t.Errorf("without a cache the value was made %d times for 3 calls", made.Load())
	}
}

// TestCachedMakeOutlivesItsCaller: the make others wait for does not stop
// when the caller that started it gives up; a caller that waited gets the
// value, not the first caller's "context canceled".
func TestCachedMakeOutlivesItsCaller(t *testing.T) {
	s := New(Options{LookupCacheBytes: 100})
	started, release := make(chan struct{}), make(chan struct{})
	build := func(ctx context.Context) (string, int64, error) {
		close(started)
		<-release
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		return "v", 1, nil
	}
	first, cancel := context.WithCancel(t.Context())
	firstDone := make(chan error, 1)
	go func() {
		_, err := Cached(first, s, "f", "k", build)
		firstDone <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		v, err := Cached(t.Context(), s, "f", "k", func(context.Context) (string, int64, error) {
			t.Error("a second make while the first runs")
			return "", 0, nil
		})
		if err == nil && v != "v" {
			err = errors.New("got " + v)
		}
		second <- err
	}()
	time.Sleep(20 * time.Millisecond) // the second caller joins the make
	cancel()
	close(release)
	if err := <-second; err != nil {
		t.Errorf("the caller that waited: %v, want the value", err)
	}
	if err := <-firstDone; err != nil {
		t.Errorf("the caller that gave up still gets what was made, got %v", err)
	}
}
