package serve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/serve"
)

// BenchmarkLookup measures what the service spends on a one-key lookup
// of a 100,000-row table through its pk index, from the parsed request to
// the written answer (the handler alone: no network, no HTTP parsing), as
// JSON lines and as an Arrow IPC stream. Its allocations per lookup are
// the collector's work that every lookup brings to a serving process.
func BenchmarkLookup(b *testing.B) {
	const rows = 100_000
	// The caches of a serving process (serve.cache-bytes), so that the
	// lookups read decoded blocks as a warm service does.
	f := newFixtureWith(b, rows, func(o *serve.Options) {
		o.Store = objstore.New(objstore.Options{FooterCacheBytes: 16 << 20, LookupCacheBytes: 64 << 20})
	})
	for _, tc := range []struct{ name, accept string }{
		{"json", ""},
		{"arrow", serve.ArrowStream},
	} {
		b.Run(tc.name, func(b *testing.B) {
			paths := make([]string, 1024)
			for i := range paths {
				paths[i] = "/v1/tables/test.orders/indexes/pk/lookup?where=" + url.QueryEscape(fmt.Sprintf("id = %d", (i*7919)%rows))
			}
			w := &discardWriter{header: http.Header{}}
			for _, p := range paths { // warm the caches
				f.handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r, _ := http.NewRequest(http.MethodGet, paths[i%len(paths)], nil)
				if tc.accept != "" {
					r.Header.Set("Accept", tc.accept)
				}
				clear(w.header)
				w.status, w.bytes = 0, 0
				f.handler.ServeHTTP(w, r)
				if w.status != http.StatusOK || w.bytes == 0 {
					b.Fatalf("lookup %s: status %d, %d bytes", paths[i%len(paths)], w.status, w.bytes)
				}
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps the status and counts the
// bytes of the answer.
type discardWriter struct {
	header http.Header
	status int
	bytes  int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.bytes += len(p)
	return len(p), nil
}
