package indexcatalog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/streamidx/streamidx/format"
)

// TestConcurrentCommits lets two writers add 20 index snapshots each to one
// index at the same time, through one catalog handle and through two (two
// processes), and checks that no update was lost and history is one line.
func TestConcurrentCommits(t *testing.T) {
	const perWriter = 20
	ctx := context.Background()
	for _, b := range backends(t) {
		for _, handles := range []string{"one-handle", "two-handles"} {
			t.Run(b.name+"/"+handles, func(t *testing.T) {
				cat, other, location := b.open(t)
				if handles == "one-handle" {
					other = cat
				}
				indexLoc := location(orders, "idx")
				md := newIndex(indexLoc)
				md.Properties[format.PropPreviousVersionsMax] = "1000"
				loc0, err := cat.Create(ctx, orders, "idx", md)
				if err != nil {
					t.Fatal(err)
				}

				stats := &commitStats{}
				writers := []Catalog{countingCatalog{cat, stats}, countingCatalog{other, stats}}
				// Both writers read the created metadata before either commits
				// its first snapshot, so at least one conflict must happen.
				var firstRead sync.WaitGroup
				firstRead.Add(len(writers))
				errs := make([]error, len(writers))
				var wg sync.WaitGroup
				for w, wcat := range writers {
					wg.Go(func() {
						arrived := sync.OnceFunc(firstRead.Done)
						defer arrived()
						for i := range perWriter {
							id := int64(100*w + i + 1)
							_, _, err := CommitWithRetry(ctx, wcat, orders, "idx", func(base *format.Metadata) (*format.Metadata, error) {
								if i == 0 {
									arrived()
									firstRead.Wait()
								}
								addSnapshot(base, id)
								return base, nil
							}, 100)
							if err != nil {
								errs[w] = err
								return
							}
						}
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}

				final, cur, err := cat.Load(ctx, orders, "idx")
				if err != nil {
					t.Fatal(err)
				}
				var want []int64
				for w := range writers {
					var mine []int64
					for _, id := range snapshotIDs(final) {
						if id/100 == int64(w) {
							mine = append(mine, id)
						}
					}
					for i := range perWriter {
						want = append(want, int64(100*w+i+1))
					}
					if !slices.IsSorted(mine) || len(mine) != perWriter {
						t.Errorf("writer %d's snapshots in the final metadata: %v", w, mine)
					}
				}
				if got := slices.Sorted(slices.Values(snapshotIDs(final))); !slices.Equal(got, want) {
					t.Errorf("final snapshots %v, want %v", got, want)
				}

				// The log and the current file form one chain from the created
				// file, each file adding one snapshot to the one before.
				var chain []string
				for _, e := range final.MetadataLog {
					chain = append(chain, e.MetadataFile)
				}
				chain = append(chain, cur)
				if len(chain) != 2*perWriter+1 || chain[0] != loc0 {
					t.Fatalf("chain of %d metadata files from %s, want %d from %s", len(chain), chain[0], 2*perWriter+1, loc0)
				}
				var prev *format.Metadata
				for k, loc := range chain {
					f := readAt(t, loc)
					ids := snapshotIDs(f)
					if len(ids) != k {
						t.Errorf("metadata file %d (%s) has %d snapshots", k, loc, len(ids))
					}
					if prev != nil {
						if !slices.Equal(snapshotIDs(prev), ids[:min(k-1, len(ids))]) {
							t.Errorf("metadata file %d does not extend file %d: %v then %v", k, k-1, snapshotIDs(prev), ids)
						}
						last := f.MetadataLog[len(f.MetadataLog)-1]
						if last.MetadataFile != chain[k-1] || last.TimestampMs != prev.LastUpdatedMs {
							t.Errorf("metadata file %d logs %+v, want %s at %d", k, last, chain[k-1], prev.LastUpdatedMs)
						}
					}
					prev = f
				}

				if won := slices.Sorted(slices.Values(stats.won)); !slices.Equal(won, slices.Sorted(slices.Values(chain[1:]))) {
					t.Errorf("%d commits reported success; they are not exactly the %d swaps in the chain", len(won), len(chain)-1)
				}
				if stats.conflicts == 0 {
					t.Error("no commit conflict observed")
				}
				files := metadataFiles(t, indexLoc)
				if len(files) != len(chain) {
					t.Errorf("%d files in the metadata directory, want the %d of the chain: %q", len(files), len(chain), files)
				}
				for _, f := range files {
					if strings.HasPrefix(f, ".") {
						t.Errorf("temporary file %s left behind", f)
					}
				}
				t.Logf("%d conflicts for %d commits", stats.conflicts, len(stats.won))
			})
		}
	}
}

// TestCommitWithRetryGivesUp keeps the base stale on every attempt and
// checks that the helper stops after maxAttempts with ErrCommitConflict.
func TestCommitWithRetryGivesUp(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, other, location := b.open(t)
			if _, err := cat.Create(ctx, orders, "idx", newIndex(location(orders, "idx"))); err != nil {
				t.Fatal(err)
			}
			calls := 0
			_, _, err := CommitWithRetry(ctx, cat, orders, "idx", func(base *format.Metadata) (*format.Metadata, error) {
				calls++
				commitSnapshot(t, other, orders, "idx", int64(calls)) // overtakes this attempt
				addSnapshot(base, int64(100+calls))
				return base, nil
			}, 3)
			if !errors.Is(err, ErrCommitConflict) || calls != 3 {
				t.Errorf("after %d attempts: %v, want 3 attempts and ErrCommitConflict", calls, err)
			}
			got, _, err := cat.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(snapshotIDs(got), []int64{1, 2, 3}) {
				t.Errorf("snapshots %v, want only the overtaking writer's [1 2 3]", snapshotIDs(got))
			}
		})
	}
}

func TestCommitWithRetryStopsOnOtherErrors(t *testing.T) {
	ctx := context.Background()
	cat, _, location := openFS(t, t.TempDir())
	if _, err := cat.Create(ctx, orders, "idx", newIndex(location(orders, "idx"))); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	calls := 0
	_, _, err := CommitWithRetry(ctx, cat, orders, "idx", func(*format.Metadata) (*format.Metadata, error) {
		calls++
		return nil, boom
	}, 5)
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("update failing: %v after %d calls, want boom after 1", err, calls)
	}
	if _, _, err := CommitWithRetry(ctx, cat, orders, "missing", nil, 5); !errors.Is(err, ErrIndexNotFound) {
		t.Errorf("missing index: %v, want ErrIndexNotFound", err)
	}
}
