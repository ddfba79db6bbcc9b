package daemon

import (
	"strconv"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/config"
)

// TestLongUpdatesPauseForShortOnes: with run.long-update-after at a
// nanosecond every update is long from its first checkpoint on; while a
// short update of another index is in flight (the test starts one before
// each step of by_customer), by_customer's build pauses, /metrics counts
// the pause, and both indexes are exact. With the setting at 0 nothing
// pauses.
func TestLongUpdatesPauseForShortOnes(t *testing.T) {
	for _, tc := range []struct {
		after config.Duration
		pause bool
	}{{config.Duration(time.Nanosecond), true}, {0, false}} {
		t.Run(time.Duration(tc.after).String(), func(t *testing.T) {
			h := newHarness(t, 0, "pk", "by_customer")
			h.cfg.Run.LongUpdateAfter = tc.after
			d := h.start(func(d *Daemon) {
				d.beforeStep = func(w *worker) {
					if w.index == "by_customer" {
						short := d.gate.Start() // nil, and a no-op, without a gate
						time.AfterFunc(100*time.Millisecond, short.Done)
					}
				}
			})
			if (d.gate != nil) != tc.pause {
				t.Fatalf("gate %v with run.long-update-after %v", d.gate, time.Duration(tc.after))
			}
			id := h.tbl.CurrentSnapshot().SnapshotID
			h.waitIndexed("pk", id)
			h.waitIndexed("by_customer", id)
			// The worker counts the step's pause once the step returns,
			// just after the index snapshot is in the catalog.
			var v string
			waitFor(t, "by_customer's paused seconds in /metrics", func() bool {
				_, body := d.get(t, "/metrics")
				var err error
				v, err = metric(body, `streamidx_updater_paused_seconds_total{index="by_customer",table="test.orders"}`)
				return err == nil
			})
			paused, err := strconv.ParseFloat(v, 64)
			if err != nil || (paused > 0) != tc.pause {
				t.Fatalf("by_customer paused %s s (%v); want a pause: %v", v, err, tc.pause)
			}
			h.verifyAll("pk")
			h.verifyAll("by_customer")
		})
	}
}
