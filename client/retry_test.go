package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRetryWaits: the policy waits what a 503 names in Retry-After (a
// second when it names nothing readable), 50 ms doubled at each attempt
// after a refused or broken connection, each at most MaxWait; it makes no
// attempt past Attempts, and none after an answer another attempt would
// get again.
func TestRetryWaits(t *testing.T) {
	overloaded := &Error{Status: http.StatusServiceUnavailable, Code: "overloaded"}
	refused := fmt.Errorf("the lookup service at x does not answer: %w", syscall.ECONNREFUSED)
	for _, c := range []struct {
		name       string
		r          Retry
		attempt    int
		err        error
		retryAfter string
		want       time.Duration
		again      bool
	}{
		{"503 names 2 s", Retry{Attempts: 3}, 1, overloaded, "2", 2 * time.Second, true},
		{"503 names nothing", Retry{Attempts: 3}, 1, overloaded, "", time.Second, true},
		{"503 capped", Retry{Attempts: 3, MaxWait: 30 * time.Millisecond}, 1, overloaded, "1", 30 * time.Millisecond, true},
		{"503 past the attempts", Retry{Attempts: 2}, 3, overloaded, "1", 0, false},
		{"no retries", Retry{}, 1, overloaded, "1", 0, false},
		{"refused, first", Retry{Attempts: 5}, 1, refused, "", 50 * time.Millisecond, true},
		{"refused, third", Retry{Attempts: 5}, 3, refused, "", 200 * time.Millisecond, true},
		{"refused, capped", Retry{Attempts: 80}, 70, refused, "", 5 * time.Second, true},
		{"broken connection", Retry{Attempts: 1}, 1, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "", 50 * time.Millisecond, true},
		{"bad predicate", Retry{Attempts: 3}, 1, &Error{Status: http.StatusBadRequest, Code: "bad_predicate"}, "", 0, false},
		{"timeout of the service", Retry{Attempts: 3}, 1, &Error{Status: http.StatusRequestTimeout, Code: "timeout"}, "", 0, false},
		{"certificate", Retry{Attempts: 3}, 1, errors.New("tls: failed to verify certificate"), "", 0, false},
	} {
		got, again := c.r.wait(c.attempt, c.err, c.retryAfter)
		if got != c.want || again != c.again {
			t.Errorf("%s: wait %s, again %v; want %s, %v", c.name, got, again, c.want, c.again)
		}
	}
}

const oneRow = `{"streamidx":{"table":"t.o","index":"pk","index_snapshot_id":1,"source_snapshot_id":2,"table_snapshot_id":2,"commits_behind":0,"rows":1,"truncated":false}}
{"id":42}
`

// TestRetryThroughHTTP: a lookup refused twice as overloaded succeeds with
// two retries and fails with one, the service's 503 returned; a bad
// predicate is asked once; a refused connection is asked again.
func TestRetryThroughHTTP(t *testing.T) {
	var calls, refusals atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/tables/t.o/indexes/bad/lookup" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, `{"error":"where: position 1: expected a column","code":"bad_predicate"}`)
			return
		}
		if n <= refusals.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, `{"error":"8 requests are being answered","code":"overloaded"}`)
			return
		}
		fmt.Fprint(w, oneRow)
	}))
	defer srv.Close()
	ctx := context.Background()
	ask := func(retry Retry, index string) (*Answer, error) {
		c := New(srv.URL, Options{Retry: retry})
		defer c.Close()
		return c.Lookup(ctx, "t.o", index, Request{Where: "id = 42"})
	}

	calls.Store(0)
	refusals.Store(2)
	if ans, err := ask(Retry{Attempts: 2}, "pk"); err != nil || len(ans.Rows) != 1 || calls.Load() != 3 {
		t.Errorf("refused twice, two retries: %v, %d calls; want the row after 3 calls", err, calls.Load())
	}
	calls.Store(0)
	if _, err := ask(Retry{Attempts: 1}, "pk"); !IsStatus(err, http.StatusServiceUnavailable) || calls.Load() != 2 {
		t.Errorf("refused twice, one retry: %v after %d calls; want the 503 after 2", err, calls.Load())
	}
	calls.Store(0)
	if _, err := ask(Retry{}, "pk"); !IsStatus(err, http.StatusServiceUnavailable) || calls.Load() != 1 {
		t.Errorf("refused, no retries: %v after %d calls; want the 503 after 1", err, calls.Load())
	}
	calls.Store(0)
	if _, err := ask(Retry{Attempts: 3}, "bad"); !IsStatus(err, http.StatusBadRequest) || calls.Load() != 1 {
		t.Errorf("bad predicate: %v after %d calls; want the 400 after 1", err, calls.Load())
	}

	// A refused connection, then the service: the transport refuses the
	// first two connections, as a port nobody listens on yet does.
	refusals.Store(0)
	calls.Store(0)
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if dials.Add(1) <= 2 {
			return nil, fmt.Errorf("dial tcp %s: %w", r.URL.Host, syscall.ECONNREFUSED)
		}
		return tr.RoundTrip(r)
	})}
	c := New(srv.URL, Options{HTTPClient: hc, Retry: Retry{Attempts: 2, MaxWait: 10 * time.Millisecond}})
	if ans, err := c.Lookup(ctx, "t.o", "pk", Request{Where: "id = 42"}); err != nil || len(ans.Rows) != 1 || dials.Load() != 3 || calls.Load() != 1 {
		t.Errorf("two refused connections, two retries: %v after %d tries, %d reaching the service; want the row after 3, 1", err, dials.Load(), calls.Load())
	}
	dials.Store(0)
	c = New(srv.URL, Options{HTTPClient: hc, Retry: Retry{Attempts: 1, MaxWait: 10 * time.Millisecond}})
	if _, err := c.Lookup(ctx, "t.o", "pk", Request{Where: "id = 42"}); !errors.Is(err, syscall.ECONNREFUSED) || dials.Load() != 2 {
		t.Errorf("two refused connections, one retry: %v after %d tries; want connection refused after 2", err, dials.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
