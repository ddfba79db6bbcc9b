package daemon

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

// TestCorruptRangeFileHaltsOnlyItsIndex: the range files of pk are replaced
// by garbage while the daemon runs. The next update of pk stops its worker
// with a corruption error naming the file (log), the halted metric and a
// failing /readyz that names pk, while by_customer keeps following the
// table.
func TestCorruptRangeFileHaltsOnlyItsIndex(t *testing.T) {
	h := newHarness(t, 0, "pk", "by_customer")
	h.cfg.Run.PollInterval = config.Duration(20 * time.Millisecond)
	d := h.start(nil)
	first := h.tbl.CurrentSnapshot().SnapshotID
	h.waitIndexed("pk", first)
	h.waitIndexed("by_customer", first)
	if code, body := d.get(t, "/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q before any damage", code, body)
	}

	garbage := map[string]bool{}
	for _, path := range h.rangeFiles("pk") {
		if err := os.WriteFile(strings.TrimPrefix(path, "file://"), bytes.Repeat([]byte("not parquet "), 100), 0o644); err != nil {
			t.Fatal(err)
		}
		garbage[path] = true
	}
	s1 := h.commit(50)
	waitFor(t, "/readyz fails", func() bool { code, _ := d.get(t, "/readyz"); return code == 503 })
	_, ready := d.get(t, "/readyz")
	if !strings.Contains(ready, "test.orders/pk halted") || !strings.Contains(ready, "corrupt") {
		t.Errorf("/readyz says %q; want it to name the halted index and the corruption", ready)
	}
	_, body := d.get(t, "/metrics")
	for sample, want := range map[string]string{
		`streamidx_updater_halted{index="pk",table="test.orders"}`:          "1",
		`streamidx_updater_halted{index="by_customer",table="test.orders"}`: "0",
	} {
		if got, err := metric(body, sample); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s", sample, got, err, want)
		}
	}
	named := false
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if !strings.Contains(line, "index halted") {
			continue
		}
		for path := range garbage {
			if strings.Contains(line, "file="+path) && strings.Contains(line, "index=pk") {
				named = true
			}
		}
	}
	if !named {
		t.Errorf("no log line names the corrupt file of pk:\n%s", h.logs)
	}

	// by_customer goes on; pk stays where it was.
	h.waitIndexed("by_customer", s1.SnapshotID)
	s2 := h.commit(55)
	h.waitIndexed("by_customer", s2.SnapshotID)
	h.verifyAll("by_customer")
	if got := h.indexed("pk"); got != first {
		t.Errorf("pk moved to %d on garbage range files", got)
	}
}

// rangeFiles lists the range files of the index's current snapshot.
func (h *harness) rangeFiles(index string) []string {
	h.t.Helper()
	ctx := context.Background()
	md, _, err := h.indexes.Load(ctx, h.tbl.Identifier(), index)
	if err != nil {
		h.t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(h.tbl, h.tbl.CurrentSnapshot()))
	if err != nil {
		h.t.Fatal(err)
	}
	tf, _, err := objstore.Local().ReadTracking(ctx, md, md.CurrentSnapshot(), is)
	if err != nil {
		h.t.Fatal(err)
	}
	entries := tf.Entries
	var out []string
	for _, e := range entries {
		out = append(out, e.FilePath)
	}
	return out
}
