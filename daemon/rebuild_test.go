package daemon

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/verify"
)

// TestRebuildOnCorruption: with run.rebuild-on-corruption the daemon does
// not halt an index whose range files are garbage; it rebuilds it from the
// table, logs that it did and why, and goes on following the table.
func TestRebuildOnCorruption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(h *harness) []string // the files it replaced by garbage
	}{
		{"range files", func(h *harness) []string { return h.rangeFiles("pk") }},
		{"tracking file", func(h *harness) []string {
			md, _, err := h.indexes.Load(context.Background(), h.tbl.Identifier(), "pk")
			if err != nil {
				h.t.Fatal(err)
			}
			return []string{md.CurrentSnapshot().TrackingFile}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0, "pk")
			h.cfg.Run.PollInterval = config.Duration(20 * time.Millisecond)
			h.cfg.Run.RebuildOnCorruption = true
			d := h.start(nil)
			first := h.tbl.CurrentSnapshot().SnapshotID
			h.waitIndexed("pk", first)
			garbage := tc.corrupt(h)
			for _, path := range garbage {
				if err := os.WriteFile(strings.TrimPrefix(path, "file://"), bytes.Repeat([]byte("not a file of the index "), 100), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s1 := h.commit(50)
			h.waitIndexed("pk", s1.SnapshotID)
			h.verifyCurrent("pk")
			s2 := h.commit(55)
			h.waitIndexed("pk", s2.SnapshotID)
			h.verifyCurrent("pk")
			if code, body := d.get(t, "/readyz"); code != 200 {
				t.Errorf("/readyz %d %q: a rebuilt index is not halted", code, body)
			}
			logged := false
			for _, line := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(line, "rebuilding it from the table") && strings.Contains(line, "index=pk") {
					for _, path := range garbage {
						logged = logged || strings.Contains(line, "file="+path)
					}
				}
				if strings.Contains(line, "index halted") {
					t.Errorf("the index halted although rebuild-on-corruption is on: %s", line)
				}
			}
			if !logged {
				t.Errorf("no log line says the index is rebuilt and names the corrupt file %v:\n%s", garbage, h.logs)
			}
		})
	}
}

// verifyCurrent checks the index's current snapshot against a full scan
// (the older ones of this test hold the garbage files).
func (h *harness) verifyCurrent(index string) {
	h.t.Helper()
	ctx := context.Background()
	md, _, err := h.indexes.Load(ctx, h.tbl.Identifier(), index)
	if err != nil {
		h.t.Fatal(err)
	}
	tbl, err := h.cat.LoadTable(ctx, h.tbl.Identifier())
	if err != nil {
		h.t.Fatal(err)
	}
	rep, err := verify.Verify(ctx, tbl, md, md.CurrentSnapshot(), verify.Options{})
	if err != nil {
		h.t.Fatalf("verify %s: %v", index, err)
	}
	if !rep.Exact() {
		h.t.Fatalf("index %s is not exact:\n%s", index, rep.Summary())
	}
}
