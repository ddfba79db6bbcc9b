package updater

import (
	"context"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/pace"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestLongStepPausesForShortOnes: under a gate whose threshold every step
// passes at once, a build and a merge that run while another index's short
// update is in flight wait for it in their loops (Stats.Paused), and what
// they publish is exact; with no short update in flight they never wait.
func TestLongStepPausesForShortOnes(t *testing.T) {
	e := newEnv(t, 3)
	tbl := e.tbl
	var rows [][]any
	for id := range int64(200) {
		rows = append(rows, row(id, 0))
	}
	tbl, _ = testtables.Append(t, tbl, rows...)
	gate := pace.NewGate(time.Nanosecond)
	u := New(e.cat, e.indexes, e.store, e.tbl.Identifier(), "pk", Options{Policy: PolicyEvery, Range: smallFiles, Gate: gate})

	step := func(what string, shortInFlight bool) Stats {
		t.Helper()
		var short *pace.Job
		if shortInFlight {
			short = gate.Start()
			defer short.Done()
		}
		// Until aligned: paused and files rewritten summed over the steps.
		var sum Stats
		for !sum.Aligned {
			st, err := u.Step(context.Background(), nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if st.Published == nil {
				t.Fatalf("%s: nothing published", what)
			}
			rewritten := st.Published.FilesRewritten
			if sum.Published != nil {
				rewritten += sum.Published.FilesRewritten
			}
			sum.Paused += st.Paused
			sum.Aligned, sum.Published = st.Aligned, st.Published
			sum.Published.FilesRewritten = rewritten
		}
		e.verifyCurrent("pk", 0)
		return sum
	}
	if st := step("build beside a short update", true); st.Paused <= 0 || !st.Published.FullBuild {
		t.Fatalf("build beside a short update: paused %v, full build %v; want a pause", st.Paused, st.Published.FullBuild)
	}
	// An upsert across the whole key range: every range file is rewritten.
	var ids [][]any
	var upserts [][]any
	for id := int64(0); id < 200; id += 7 {
		ids = append(ids, []any{id})
		upserts = append(upserts, row(id, 1))
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, ids...)
	tbl, _ = testtables.Append(t, tbl, upserts...)
	if st := step("merge beside a short update", true); st.Paused <= 0 || st.Published.FullBuild || st.Published.FilesRewritten < 2 {
		t.Fatalf("merge beside a short update: paused %v, full build %v, files rewritten %d; want a pause in a merge of several files",
			st.Paused, st.Published.FullBuild, st.Published.FilesRewritten)
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, ids...)
	_, _ = testtables.Append(t, tbl, upserts...)
	if st := step("merge alone", false); st.Paused != 0 {
		t.Fatalf("merge alone: paused %v, want none", st.Paused)
	}
	if n, total := gate.Waited(); n < 2 || total <= 0 {
		t.Fatalf("gate: %d waits, %v in all; want the build's and the merge's", n, total)
	}
}
