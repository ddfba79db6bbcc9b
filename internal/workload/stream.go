package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StreamOptions describe a steady stream of CDC upsert commits on an orders
// table.
type StreamOptions struct {
	// Rows is the number of orders the table holds (ids [0, Rows)): upserts
	// pick among them. Required.
	Rows int64
	// Upserts is the number of orders each commit upserts. Default: 1000.
	Upserts int64
	// Pattern picks the upserted orders: tail (the Upserts highest ids, the
	// recent orders that a CDC feed keeps updating) or uniform (spread over
	// all ids, different ones each commit). Default: tail.
	Pattern string
	// Interval is the time from the start of one commit to the start of the
	// next: a commit that takes longer delays the next, never doubles it
	// up. Default: 1s.
	Interval time.Duration
	// Commits is the number of commits; 0 streams until the context ends.
	// Default: 0.
	Commits int
	// Seed makes the upserted values and the uniform picks reproducible.
	// Default: 1.
	Seed uint64
	// Notify, when set, is called after each commit with the table as it
	// committed and the commit (Took not yet set), e.g. to announce the
	// commit on Kafka (KafkaNotifier). An error ends the stream. Default:
	// none.
	Notify func(ctx context.Context, tbl *table.Table, c Commit) error
	// Reload, when set, loads the table before each commit, and again when
	// a commit loses the race with another writer's, which is then made
	// again (up to 5 attempts): the stream is then not the table's only
	// writer, e.g. the daemon rewrites equality deletes into deletion
	// vectors. Without it every commit builds on the stream's own previous
	// one. Default: none.
	Reload func(ctx context.Context) (*table.Table, error)
	// OnCommit, when set, is called after each commit (and its
	// notification). Default: none.
	OnCommit func(Commit)
}

// Commit is one commit of a stream.
type Commit struct {
	// N counts the stream's commits from 1.
	N int
	// SnapshotID, SequenceNumber and TimestampMs are the snapshot's.
	SnapshotID, SequenceNumber, TimestampMs int64
	// Upserts is the number of orders the commit upserted.
	Upserts int
	// IDs are the upserted orders, and Version the version of them the
	// commit wrote (Order(id, Version, seed)): the commit's N.
	IDs     []int64
	Version int
	// Took is the time the commit and its notification took.
	Took time.Duration
}

// Stream commits upserts to tbl (an equality delete of the orders' ids and
// their next version in one snapshot, as a CDC sink writes them) at a fixed
// rate until opts.Commits are made or ctx ends, and returns the commits
// made. An ended context is not an error.
func Stream(ctx context.Context, tbl *table.Table, opts StreamOptions) ([]Commit, error) {
	if opts.Rows < 1 {
		return nil, fmt.Errorf("stream upserts: the table holds no orders (Rows is %d)", opts.Rows)
	}
	if opts.Upserts <= 0 {
		opts.Upserts = 1000
	}
	if opts.Pattern == "" {
		opts.Pattern = "tail"
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var out []Commit
	for n := 1; opts.Commits == 0 || n <= opts.Commits; n++ {
		if n > 1 {
			select {
			case <-ctx.Done():
				return out, nil
			case <-tick.C:
			}
		}
		if ctx.Err() != nil {
			return out, nil
		}
		began := time.Now()
		ids, err := UpsertIDs(opts.Rows, opts.Upserts, opts.Pattern, opts.Seed+uint64(n))
		if err != nil {
			return out, err
		}
		// Each commit writes the next version of its orders.
		next, err := upsertRetrying(ctx, tbl, ids, n, opts)
		if err != nil {
			if ctx.Err() != nil {
				return out, nil
			}
			return out, fmt.Errorf("commit %d of the stream: %w", n, err)
		}
		tbl = next
		s := tbl.CurrentSnapshot()
		c := Commit{N: n, SnapshotID: s.SnapshotID, SequenceNumber: s.SequenceNumber, TimestampMs: s.TimestampMs,
			Upserts: len(ids), IDs: ids, Version: n}
		if opts.Notify != nil {
			if err := opts.Notify(ctx, tbl, c); err != nil {
				if ctx.Err() != nil {
					return out, nil
				}
				return out, fmt.Errorf("notify commit %d of the stream: %w", n, err)
			}
		}
		c.Took = time.Since(began)
		out = append(out, c)
		if opts.OnCommit != nil {
			opts.OnCommit(c)
		}
	}
	return out, nil
}

// upsertRetrying makes one upsert commit, on the table as opts.Reload
// finds it when set, and again on the newer table when another writer
// moved the head first (the catalog says so with table.ErrCommitFailed or
// with a failed requirement). Making an upsert again is safe even if the
// failed attempt landed after all: it writes the same version of the same
// orders.
func upsertRetrying(ctx context.Context, tbl *table.Table, ids []int64, version int, opts StreamOptions) (*table.Table, error) {
	const attempts = 5
	if opts.Reload != nil {
		t, err := opts.Reload(ctx)
		if err != nil {
			return nil, fmt.Errorf("load the table: %w", err)
		}
		tbl = t
	}
	for attempt := 1; ; attempt++ {
		next, err := Upsert(ctx, tbl, ids, version, opts.Seed)
		if err == nil || opts.Reload == nil || attempt == attempts || ctx.Err() != nil {
			return next, err
		}
		fresh, lerr := opts.Reload(ctx)
		if lerr != nil {
			return nil, fmt.Errorf("%w (and loading the table again: %v)", err, lerr)
		}
		if headID(fresh) == headID(tbl) && !errors.Is(err, table.ErrCommitFailed) {
			return nil, err
		}
		tbl = fresh
	}
}

// headID is the current snapshot's id, 0 for none.
func headID(tbl *table.Table) int64 {
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

// KafkaNotifier returns a StreamOptions.Notify that produces streamidx's
// native commit notification of each commit ({"table", "snapshot-id",
// "sequence-number", "timestamp-ms"}) to topic, and waits for the broker to
// acknowledge it.
func KafkaNotifier(client *kgo.Client, topic string) func(context.Context, *table.Table, Commit) error {
	return func(ctx context.Context, tbl *table.Table, _ Commit) error {
		s := tbl.CurrentSnapshot()
		v, err := json.Marshal(map[string]any{
			"table":           strings.Join(tbl.Identifier(), "."),
			"snapshot-id":     s.SnapshotID,
			"sequence-number": s.SequenceNumber,
			"timestamp-ms":    s.TimestampMs,
		})
		if err != nil {
			return err
		}
		return client.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr()
	}
}
