package daemon

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadyWaitsForTheWarmUp: with a WarmFunc, /readyz says "warming the
// lookup cache" and names the index from its catch-up until the warm-up
// returns, then "ready"; the WarmFunc gets each index once; a failed
// warm-up is logged and still makes the daemon ready.
func TestReadyWaitsForTheWarmUp(t *testing.T) {
	h := newHarness(t, 0, "pk", "by_customer")
	release := make(chan struct{})
	var calls atomic.Int32
	var pkCalls atomic.Int32
	d := h.start(func(d *Daemon) {
		d.WarmWith(func(ctx context.Context, table, index string) error {
			calls.Add(1)
			if index == "by_customer" {
				return errors.New("no such page")
			}
			pkCalls.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	})
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID)
	waitFor(t, "both warm-ups to start", func() bool { return calls.Load() == 2 })
	code, body := d.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "warming the lookup cache") || !strings.Contains(body, "pk") {
		t.Fatalf("/readyz while pk warms: %d %q; want 503 naming the warm-up and pk", code, body)
	}
	if strings.Contains(body, "by_customer") {
		t.Errorf("/readyz %q names by_customer, whose warm-up failed (done)", body)
	}
	close(release)
	waitFor(t, "/readyz after the warm-up", func() bool { code, _ := d.get(t, "/readyz"); return code == http.StatusOK })
	if n := pkCalls.Load(); n != 1 {
		t.Errorf("pk warmed %d times, want once", n)
	}
	if !strings.Contains(h.logs.String(), "warming the lookup cache failed") {
		t.Errorf("the failed warm-up of by_customer was not logged:\n%s", h.logs.String())
	}
}
