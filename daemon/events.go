package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/kafkaconn"
	"github.com/streamidx/streamidx/internal/procs"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// The change feed reads the change topics (run.kafka.change-topics) and
// stages each event's entry mutations for every events-fed index of its
// table, keyed by topic, partition and offset. Every process reads every
// partition: an events-fed index needs all of its table's events, so the
// change topics are not split in a consumer group. The position of each
// partition is the staged range that the staging store records in the
// same write as the events; a restart resumes there, so a crash redelivers
// what was not staged, and staging an event again writes the same keys.
//
// Records are decoded on every core and staged in order by one goroutine:
// a fetch is cut into chunks that the decoders take in parallel, and the
// stager adds the chunks of a fetch to a batch in offset order, with the
// positions, and once the dead letters among them are written hands the
// batch to a committer goroutine: after the last chunk of the fetch, or
// after an earlier one once the batch is full.

// eventsTable is a table with events-fed indexes.
type eventsTable struct {
	name    string
	id      table.Identifier
	workers []*worker // the events-fed ones
	// codec is what decoders need, replaced when the table's schema changes.
	codec atomic.Pointer[eventsCodec]
}

// eventsCodec decodes the events of one table for its events-fed indexes,
// against one schema.
type eventsCodec struct {
	schemaID int
	cols     *ingest.RowColumns
	indexes  []eventsIndex
	opts     ingest.DebeziumOptions
}

type eventsIndex struct {
	log string // staging.EventBatch index name
	is  *format.IndexSchema
}

// changeFeed consumes the change topics.
type changeFeed struct {
	d      *Daemon
	topics []config.ChangeTopic
	opts   ingest.DebeziumOptions
	// tables with events-fed indexes by name; fixed once run starts.
	tables map[string]*eventsTable
	// feeds[topic] are the tables the topic may feed: its bound table, or
	// every events table for an unbound topic.
	feeds  map[string][]*eventsTable
	client *kgo.Client
	// assigned are the partitions read, by topic: those the topics had at
	// the start and those watchPartitions added since.
	assigned map[string][]int32
	// ranges[log][tp] is the staged range of each index, as last committed.
	ranges map[string]map[staging.TopicPartition]staging.EventRange
	// notes are the commit notifications read from the commit topic
	// (events_notes.go); caught tells when those the topic held at the
	// start are read (catchup.go).
	notes  *knownNotes
	caught *catchUp
	// staged and stagedBytes count the events committed to staging and
	// their records' size, for MeasureChangeFeed.
	staged, stagedBytes atomic.Int64
}

func newChangeFeed(d *Daemon, topics []config.ChangeTopic) *changeFeed {
	return &changeFeed{d: d, topics: topics, opts: ingest.DebeziumOptions{DecimalHandling: d.cfg.Run.Kafka.DebeziumDecimalHandling},
		tables: map[string]*eventsTable{}, feeds: map[string][]*eventsTable{},
		ranges: map[string]map[staging.TopicPartition]staging.EventRange{}, notes: newKnownNotes(), caught: newCatchUp()}
}

// tableFeed is the updater.EventFeed of one table.
type tableFeed struct {
	table  string
	topics []string
	ledger *ledger
	notes  *knownNotes
}

func (f *tableFeed) Topics() []string { return f.topics }

func (f *tableFeed) CommitOffsets(snapshotID int64) (map[staging.TopicPartition]int64, bool) {
	if o, ok := f.notes.offsets(f.table, snapshotID); ok {
		return o, true
	}
	return f.ledger.commitOffsets(f.table, snapshotID)
}

// topicsOf lists the change topics that may feed table name.
func topicsOf(topics []config.ChangeTopic, name string) []string {
	var out []string
	for _, t := range topics {
		if t.Table == "" || t.Table == name {
			out = append(out, t.Topic)
		}
	}
	return out
}

// setUp finds the events-fed indexes, loads their tables and the staged
// ranges, and connects to the brokers; it retries until ctx ends, so a
// catalog or broker that is down at start delays the feed, not the daemon.
func (f *changeFeed) setUp(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := f.load(ctx)
		if err == nil {
			err = f.connect(ctx)
		}
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		delay := retryDelay(attempt)
		f.d.log.Warn("change feed cannot start; retrying", "err", err, "retry_in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

func (f *changeFeed) load(ctx context.Context) error {
	clear(f.tables)
	clear(f.feeds)
	for name, ws := range f.d.byTable {
		t := &eventsTable{name: name, id: ws[0].id}
		for _, w := range ws {
			md, _, err := f.d.indexes.Load(ctx, w.id, w.index)
			if err != nil {
				return fmt.Errorf("load index %s: %w", w.name(), err)
			}
			if indexdef.EventsFed(md) {
				t.workers = append(t.workers, w)
			}
		}
		if len(t.workers) == 0 {
			continue
		}
		if len(topicsOf(f.topics, name)) == 0 {
			f.d.log.Warn("events-fed indexes but no change topic for their table: they follow the table", "table", name)
			continue
		}
		if err := f.refresh(ctx, t); err != nil {
			return err
		}
		f.tables[name] = t
	}
	for _, ct := range f.topics {
		for name, t := range f.tables {
			if ct.Table == "" || ct.Table == name {
				f.feeds[ct.Topic] = append(f.feeds[ct.Topic], t)
			}
		}
	}
	for _, t := range f.tables {
		for _, ix := range t.codec.Load().indexes {
			r, err := f.d.store.EventRanges(ix.log)
			if err != nil {
				return err
			}
			f.ranges[ix.log] = r
		}
	}
	return nil
}

// refresh (re)builds t's codec from its table's current schema and index
// definitions.
func (f *changeFeed) refresh(ctx context.Context, t *eventsTable) error {
	tbl, err := f.d.tables.LoadTable(ctx, t.id)
	if err != nil {
		return fmt.Errorf("load table %s: %w", t.name, err)
	}
	schema := tbl.Schema()
	if c := t.codec.Load(); c != nil && c.schemaID == schema.ID {
		return nil
	}
	c := &eventsCodec{schemaID: schema.ID, opts: f.opts}
	var ids []int
	for _, w := range t.workers {
		md, _, err := f.d.indexes.Load(ctx, w.id, w.index)
		if err != nil {
			return fmt.Errorf("load index %s: %w", w.name(), err)
		}
		is, err := format.NewIndexSchema(md, schema)
		if err != nil {
			return fmt.Errorf("index %s: %w", w.name(), err)
		}
		c.indexes = append(c.indexes, eventsIndex{log: updater.EventLog(w.id, w.index), is: is})
		ids = append(ids, is.SourceFieldIDs()...)
	}
	if c.cols, err = ingest.NewRowColumns(schema, ids); err != nil {
		return fmt.Errorf("events of table %s: %w", t.name, err)
	}
	for _, ix := range c.indexes {
		if _, err := ingest.NewEventEntries(ix.is, c.cols); err != nil {
			return fmt.Errorf("events of table %s: %w", t.name, err)
		}
	}
	t.codec.Store(c)
	return nil
}

// connect finds the partitions of the change topics and starts reading
// each where the staged ranges of the indexes it feeds end (the lowest of
// them; events below an index's range end are not staged for it again).
func (f *changeFeed) connect(ctx context.Context) error {
	k := f.d.cfg.Run.Kafka
	if len(f.feedTopics()) == 0 {
		return nil
	}
	conn, err := kafkaconn.Options(k, f.d.log)
	if err != nil {
		return err
	}
	meta, err := kgo.NewClient(append(conn, kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return fmt.Errorf("connect to kafka %v: %w", k.Brokers, err)
	}
	defer meta.Close()
	parts, err := f.partitions(ctx, meta)
	if err != nil {
		return err
	}
	start, err := f.startOffsets(ctx, meta, parts)
	if err != nil {
		return err
	}
	ends, err := commitTopicEnds(ctx, meta, k.CommitTopic, start[k.CommitTopic])
	if err != nil {
		return err
	}
	// Fetches of about 2 MiB: the stager commits one batch per fetch, and
	// while one fetch is decoded the client holds the next, so larger
	// fetches only cost memory (records of tens of MiB in flight, a fresh
	// Pebble batch too large to reuse, more garbage to collect) and CPU
	// with it: 64 MiB fetches cost about half as much again per event as
	// 8 MiB ones, and 8 MiB ones a fifth more than 2 MiB ones (fresh
	// memory for each fetch's decompressed records is paid for in page
	// faults); below 2 MiB nothing more is saved.
	client, err := kgo.NewClient(append(conn, kgo.ConsumePartitions(start),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(),
		kgo.FetchMaxBytes(2<<20), kgo.FetchMaxPartitionBytes(512<<10))...)
	if err != nil {
		return fmt.Errorf("connect to kafka %v: %w", k.Brokers, err)
	}
	f.client, f.assigned = client, parts
	f.caught.expect(ends)
	return nil
}

// feedTopics are the change topics that feed some table here.
func (f *changeFeed) feedTopics() []string {
	var topics []string
	for _, ct := range f.topics {
		if len(f.feeds[ct.Topic]) > 0 {
			topics = append(topics, ct.Topic)
		}
	}
	return topics
}

// partitions asks the brokers for the partitions of the change topics
// that feed a table and of the commit topic.
func (f *changeFeed) partitions(ctx context.Context, cl *kgo.Client) (map[string][]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, topic := range append(f.feedTopics(), f.d.cfg.Run.Kafka.CommitTopic) {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("read the partitions of the change topics: %w", err)
	}
	out := map[string][]int32{}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 || len(rt.Partitions) == 0 {
			return nil, fmt.Errorf("topic %s is not available (error code %d)", *rt.Topic, rt.ErrorCode)
		}
		for _, p := range rt.Partitions {
			out[*rt.Topic] = append(out[*rt.Topic], p.Partition)
		}
	}
	return out, nil
}

// startOffsets says where to start reading parts: a partition of the
// commit topic at the group's committed offset, one of a change topic at
// the lowest end of the staged ranges of the indexes it feeds (its start
// when one of them has staged none of it).
func (f *changeFeed) startOffsets(ctx context.Context, cl *kgo.Client, parts map[string][]int32) (map[string]map[int32]kgo.Offset, error) {
	k := f.d.cfg.Run.Kafka
	start := map[string]map[int32]kgo.Offset{}
	for topic, ps := range parts {
		if topic == k.CommitTopic {
			var err error
			if start[topic], err = commitTopicStart(ctx, cl, topic, k.Group, ps); err != nil {
				return nil, err
			}
			continue
		}
		start[topic] = map[int32]kgo.Offset{}
		for _, p := range ps {
			tp := staging.TopicPartition{Topic: topic, Partition: p}
			at := int64(-1)
			for _, t := range f.feeds[topic] {
				for _, ix := range t.codec.Load().indexes {
					r, ok := f.ranges[ix.log][tp]
					if !ok {
						at = 0
					} else if at < 0 || r.Through < at {
						at = r.Through
					}
				}
			}
			start[topic][p] = kgo.NewOffset().At(max(at, 0))
		}
	}
	return start, nil
}

// watchPartitions asks the brokers for the partitions of the topics every
// run.kafka.metadata-max-age, and reads the partitions added since the
// feed started from their start: no index holds an event of a partition
// it never read, and a commit notification that names offsets of one
// waits until its events are staged (reading a commit topic partition
// from its start reads notifications again, which changes nothing). A
// failed request is logged and tried again at the next tick.
func (f *changeFeed) watchPartitions(ctx context.Context) {
	tick := time.NewTicker(time.Duration(f.d.cfg.Run.Kafka.MetadataMaxAge))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := f.partitions(ctx, f.client)
		if err != nil {
			if ctx.Err() == nil {
				f.d.log.Warn("change feed: cannot read the partitions of its topics; trying again later", "err", err)
			}
			continue
		}
		added := map[string]map[int32]kgo.Offset{}
		for topic, ps := range parts {
			for _, p := range ps {
				if slices.Contains(f.assigned[topic], p) {
					continue
				}
				if added[topic] == nil {
					added[topic] = map[int32]kgo.Offset{}
				}
				added[topic][p] = kgo.NewOffset().AtStart()
				f.d.log.Info("change feed: reading a partition added to its topic", "topic", topic, "partition", p)
				f.assigned[topic] = append(f.assigned[topic], p)
			}
		}
		if len(added) > 0 {
			f.client.AddConsumePartitions(added)
		}
	}
}

// close stops the consumer; what was fetched but not staged is read again
// at the next start.
func (f *changeFeed) close() {
	if f.client != nil {
		f.client.Close()
	}
}

// chunk is a slice of a fetch's records, decoded by one decoder goroutine.
type chunk struct {
	recs []*kgo.Record
	// out[i] is what record i gives.
	out []recordResult
	// arena holds the keys and values of the mutations.
	arena []byte
	muts  []stagedMutation
	done  chan struct{}
	last  bool // the last chunk of its fetch: the stager commits after it
}

// recordResult is the outcome of decoding one record.
type recordResult struct {
	table     *eventsTable // nil: the record feeds no table here
	tombstone bool
	err       error // the record goes to the dead-letter topic
	schema    bool  // err is ErrUnknownColumn: try again with a fresh schema
	muts      [2]int
}

// stagedMutation is a mutation in a chunk's arena.
type stagedMutation struct {
	log        string
	offset     int64
	seq        uint8
	key, value [2]int // arena spans
	count      int
}

const chunkRecords = 512

// run consumes until ctx ends.
func (f *changeFeed) run(ctx context.Context) error {
	if err := f.setUp(ctx); err != nil || f.client == nil {
		f.caught.finish()
		<-ctx.Done() // nothing to read: wait for the daemon to stop
		return nil
	}
	f.d.log.Info("change feed started", "topics", topicNames(f.topics), "tables", len(f.tables))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		f.watchPartitions(ctx)
	}()
	defer func() {
		cancel()
		<-watched
	}()
	jobs := make(chan *chunk, 4)
	ordered := make(chan *chunk, 16)
	var wg sync.WaitGroup
	for range procs.Work() {
		wg.Go(func() { f.decodeLoop(jobs) })
	}
	var stageErr error
	stagerDone := make(chan struct{})
	go func() {
		defer close(stagerDone)
		if stageErr = f.stageLoop(ctx, ordered); stageErr != nil {
			cancel()
			for c := range ordered { // let the poll loop finish its sends
				<-c.done
			}
		}
	}()
	err := f.poll(ctx, jobs, ordered)
	close(jobs)
	close(ordered)
	wg.Wait()
	<-stagerDone
	if stageErr != nil {
		return stageErr
	}
	return err
}

// poll fetches records and hands them out in chunks until ctx ends.
func (f *changeFeed) poll(ctx context.Context, jobs, ordered chan<- *chunk) error {
	for {
		fetches := f.client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				f.d.log.Warn("fetching change events failed; retrying", "topic", topic, "partition", p, "err", err)
				fetchErr = err
			}
		})
		recs := f.takeNotifications(fetches.Records())
		if len(recs) == 0 {
			if fetchErr != nil {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
			}
			continue
		}
		for i := 0; i < len(recs); i += chunkRecords {
			c := newChunk(recs[i:min(i+chunkRecords, len(recs))], i+chunkRecords >= len(recs))
			select {
			case ordered <- c:
			case <-ctx.Done():
				return nil
			}
			select {
			case jobs <- c:
			case <-ctx.Done():
				close(c.done)
				return nil
			}
		}
	}
}

// takeNotifications records the commit-topic records among recs, wakes
// the events-fed workers of their tables, and returns the others.
func (f *changeFeed) takeNotifications(recs []*kgo.Record) []*kgo.Record {
	k := f.d.cfg.Run.Kafka
	out := recs[:0]
	for _, r := range recs {
		if r.Topic != k.CommitTopic {
			out = append(out, r)
			continue
		}
		if f.d.beforeNote != nil {
			f.d.beforeNote(r)
		}
		if t := f.tables[f.notes.record(r, k.CommitFormat)]; t != nil {
			for _, w := range t.workers {
				w.poke()
			}
		}
		f.caught.read(r.Partition, r.Offset)
	}
	return out
}

// chunkBuffers keeps the buffers of staged chunks for the next ones.
var chunkBuffers = sync.Pool{New: func() any { return &chunk{} }}

// newChunk returns a chunk of recs with buffers from earlier chunks.
func newChunk(recs []*kgo.Record, last bool) *chunk {
	c := chunkBuffers.Get().(*chunk)
	c.recs, c.last, c.done = recs, last, make(chan struct{})
	c.arena, c.muts = c.arena[:0], c.muts[:0]
	if cap(c.out) < len(recs) {
		c.out = make([]recordResult, len(recs))
	}
	c.out = c.out[:len(recs)]
	clear(c.out)
	return c
}

// release hands a staged chunk's buffers back.
func (c *chunk) release() {
	c.recs = nil
	chunkBuffers.Put(c)
}

// decodeLoop decodes chunks; each goroutine keeps decoders of its own.
func (f *changeFeed) decodeLoop(jobs <-chan *chunk) {
	dec := map[*eventsTable]*tableDecoder{}
	for c := range jobs {
		for i, r := range c.recs {
			c.out[i] = f.decodeRecord(dec, c, r)
		}
		close(c.done)
	}
}

// tableDecoder decodes one table's events in one goroutine.
type tableDecoder struct {
	codec   *eventsCodec
	dec     *ingest.ChangeDecoder
	entries []*ingest.EventEntries
	ev      ingest.ChangeEvent
	muts    []ingest.EventMutation
}

func newTableDecoder(c *eventsCodec) (*tableDecoder, error) {
	td := &tableDecoder{codec: c}
	var err error
	if td.dec, err = ingest.NewChangeDecoder(c.cols, c.opts); err != nil {
		return nil, err
	}
	for _, ix := range c.indexes {
		ee, err := ingest.NewEventEntries(ix.is, c.cols)
		if err != nil {
			return nil, err
		}
		td.entries = append(td.entries, ee)
	}
	return td, nil
}

// route finds the table a record feeds: its topic's bound table, the table
// a native event names, or the only events table. bound says the topic
// decided: a native event there that names another table is refused once it
// is decoded (checkBound), which spares every record a scan of its own.
func (f *changeFeed) route(r *kgo.Record) (t *eventsTable, bound bool, err error) {
	feeds := f.feeds[r.Topic]
	for _, ct := range f.topics {
		if ct.Topic == r.Topic && ct.Table != "" {
			if len(feeds) == 0 {
				return nil, true, nil
			}
			return feeds[0], true, nil
		}
	}
	if named := ingest.PeekTable(r.Value); named != "" {
		return f.tables[named], false, nil // nil: a table with no events-fed index here
	}
	if len(f.tables) == 1 {
		for _, t := range f.tables {
			return t, false, nil
		}
	}
	return nil, false, fmt.Errorf("change topic %s is bound to no table and the event names none: bind it with %s=NS.TABLE", r.Topic, r.Topic)
}

// misrouted is the refusal of a native event that names a table other than
// t, the table its topic is bound to; named is the table it names ("" when
// it names none, or is no native event).
func misrouted(r *kgo.Record, t *eventsTable, named string) error {
	if named == "" || named == t.name {
		return nil
	}
	return fmt.Errorf("native event for table %s on change topic %s, which feeds %s", named, r.Topic, t.name)
}

// decodeRecord decodes r and puts its mutations into c.
func (f *changeFeed) decodeRecord(dec map[*eventsTable]*tableDecoder, c *chunk, r *kgo.Record) recordResult {
	if len(r.Value) == 0 {
		return recordResult{tombstone: true}
	}
	t, bound, err := f.route(r)
	if err != nil || t == nil {
		return recordResult{err: err}
	}
	res := recordResult{table: t}
	td := dec[t]
	if cur := t.codec.Load(); td == nil || td.codec != cur {
		if td, err = newTableDecoder(cur); err != nil {
			res.err = err
			return res
		}
		dec[t] = td
	}
	if err := td.dec.Decode(r.Value, &td.ev); err != nil {
		if errors.Is(err, ingest.ErrTombstone) {
			res.tombstone = true
			return res
		}
		if bound {
			// Named for another table, the event fails for that reason,
			// not for not fitting this table's columns.
			if merr := misrouted(r, t, ingest.PeekTable(r.Value)); merr != nil {
				res.err = merr
				return res
			}
		}
		res.err, res.schema = err, errors.Is(err, ingest.ErrUnknownColumn)
		return res
	}
	if bound {
		if res.err = misrouted(r, t, td.ev.Table); res.err != nil {
			return res
		}
	}
	if td.ev.Table != "" && td.ev.Table != t.name {
		res.err = fmt.Errorf("native event for table %s routed to table %s", td.ev.Table, t.name)
		return res
	}
	res.muts[0] = len(c.muts)
	for i, ee := range td.entries {
		if td.muts, err = ee.Mutations(td.muts[:0], &td.ev); err != nil {
			c.muts = c.muts[:res.muts[0]]
			res.err = err
			return res
		}
		for _, m := range td.muts {
			sm := stagedMutation{log: td.codec.indexes[i].log, offset: r.Offset, seq: m.Seq, count: m.Count}
			sm.key = [2]int{len(c.arena), len(c.arena) + len(m.Key)}
			c.arena = append(c.arena, m.Key...)
			sm.value = [2]int{len(c.arena), len(c.arena) + len(m.Value)}
			c.arena = append(c.arena, m.Value...)
			c.muts = append(c.muts, sm)
		}
	}
	res.muts[1] = len(c.muts)
	return res
}

// stageLoop stages the chunks in fetch order and commits after the last
// chunk of each fetch, or sooner when the batch is full. Two batches take
// turns: while one is written to Pebble (its entries inserted into the
// memtable, the larger part of staging) by a committer goroutine, the
// stager fills the other, so the two halves of staging run on two cores.
// Commits keep their order, so a range is never written before the events
// of an earlier batch.
func (f *changeFeed) stageLoop(ctx context.Context, ordered <-chan *chunk) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan *staging.EventBatch, 2)
	for range cap(free) {
		b := f.d.store.NewEventBatch()
		defer b.Close()
		free <- b
	}
	commits := make(chan *filledBatch, 1)
	committed := make(chan error, 1)
	go func() { committed <- f.commitLoop(ctx, cancel, commits, free) }()
	err := f.fillLoop(ctx, ordered, commits, free)
	close(commits)
	if cerr := <-committed; err == nil {
		err = cerr
	}
	return err
}

// filledBatch is a batch handed from the stager to the committer, with what
// it counts once committed.
type filledBatch struct {
	batch                          *staging.EventBatch
	staged, stagedBytes, tombstone int
	dead                           int
	touched                        []*eventsTable
}

// fillLoop adds the chunks' mutations to a batch and hands it to the
// committer at the points its ranges can stand. It returns when ordered is
// closed or ctx ends (the committer failed or the feed stops).
func (f *changeFeed) fillLoop(ctx context.Context, ordered <-chan *chunk, commits chan<- *filledBatch, free <-chan *staging.EventBatch) error {
	pending := map[string]map[staging.TopicPartition]staging.EventRange{} // ranges to write with the batch
	var dead []*kgo.Record
	fb := &filledBatch{batch: <-free}
	touched := map[*eventsTable]bool{}
	for c := range ordered {
		<-c.done
		if ctx.Err() != nil {
			return nil // nothing more is committed
		}
		for i, r := range c.recs {
			res := c.out[i]
			if res.schema {
				res = f.retryWithFreshSchema(ctx, c, r, res)
			}
			tp := staging.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			switch {
			case res.tombstone:
				fb.tombstone++
			case res.err != nil:
				dead = append(dead, f.deadLetter(r, res.err))
			case res.table != nil:
				touched[res.table] = true
				for _, m := range c.muts[res.muts[0]:res.muts[1]] {
					if rg, ok := f.ranges[m.log][tp]; ok && m.offset < rg.Through {
						continue // staged for this index before a restart
					}
					if err := fb.batch.Add(m.log, tp, m.offset, m.seq, c.arena[m.key[0]:m.key[1]], c.arena[m.value[0]:m.value[1]], m.count); err != nil {
						return f.fail(err)
					}
				}
				fb.staged++
				fb.stagedBytes += len(r.Value)
			}
			f.advance(pending, tp, r.Offset)
		}
		last := c.last
		c.release() // the batch holds copies of what it staged
		if !last && !fb.batch.Full() {
			continue
		}
		if len(dead) > 0 && !f.sendDeadLetters(ctx, dead) {
			return nil // shutting down: the fetch is read again at the next start
		}
		for log, tps := range pending {
			for tp, rg := range tps {
				if err := fb.batch.SetRange(log, tp, rg); err != nil {
					return f.fail(err)
				}
			}
		}
		// The stager reads the ranges only to skip what was staged before
		// a restart; if this commit fails, the feed stops.
		for log, tps := range pending {
			for tp, rg := range tps {
				if f.ranges[log] == nil {
					f.ranges[log] = map[staging.TopicPartition]staging.EventRange{}
				}
				f.ranges[log][tp] = rg
			}
		}
		clear(pending)
		fb.dead = len(dead)
		dead = nil
		for t := range touched {
			fb.touched = append(fb.touched, t)
		}
		clear(touched)
		select {
		case commits <- fb:
		case <-ctx.Done():
			return nil
		}
		select {
		case b := <-free:
			fb = &filledBatch{batch: b}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// commitLoop commits the filled batches in order and hands them back
// empty. After ctx ends nothing more is committed; when a commit fails it
// cancels the stager and returns the error.
func (f *changeFeed) commitLoop(ctx context.Context, cancel context.CancelFunc, commits <-chan *filledBatch, free chan<- *staging.EventBatch) error {
	var err error
	for fb := range commits {
		if err == nil && ctx.Err() == nil {
			if err = f.commit(ctx, fb.batch); err != nil {
				err = f.fail(err)
				cancel()
			} else {
				f.d.metrics.eventsStaged.Add(float64(fb.staged))
				f.staged.Add(int64(fb.staged))
				f.stagedBytes.Add(int64(fb.stagedBytes))
				f.d.metrics.eventTombstones.Add(float64(fb.tombstone))
				f.d.metrics.eventsDeadLettered.Add(float64(fb.dead))
				for _, t := range fb.touched {
					for _, w := range t.workers {
						w.poke()
					}
				}
			}
		}
		free <- fb.batch
	}
	return err
}

// advance extends the staged range of every index tp feeds past offset.
func (f *changeFeed) advance(pending map[string]map[staging.TopicPartition]staging.EventRange, tp staging.TopicPartition, offset int64) {
	for _, t := range f.feeds[tp.Topic] {
		for _, ix := range t.codec.Load().indexes {
			p := pending[ix.log]
			if p == nil {
				p = map[staging.TopicPartition]staging.EventRange{}
				pending[ix.log] = p
			}
			rg, ok := p[tp]
			if !ok {
				rg, ok = f.ranges[ix.log][tp]
			}
			switch {
			case !ok:
				rg = staging.EventRange{From: offset, Through: offset + 1}
			case offset > rg.Through:
				// Offsets the broker no longer has (retention) or never
				// had (compaction, transaction markers): the index cannot
				// tell which, so its position, if before here, is lost.
				f.d.log.Warn("change topic skipped offsets; an index whose position is before them is rebuilt from the table",
					"topic", tp.Topic, "partition", tp.Partition, "from", rg.Through, "to", offset)
				rg = staging.EventRange{From: offset, Through: offset + 1}
			default:
				rg.Through = max(rg.Through, offset+1)
			}
			p[tp] = rg
		}
	}
}

// commit writes the batch, retrying while the staging disk is full.
func (f *changeFeed) commit(ctx context.Context, batch *staging.EventBatch) error {
	for attempt := 1; ; attempt++ {
		err := batch.Commit()
		if !errors.Is(err, staging.ErrDiskFull) {
			return err
		}
		delay := retryDelay(attempt)
		f.d.log.Warn("staging disk is full: change events wait", "err", err, "retry_in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

func (f *changeFeed) fail(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	f.d.log.Error("change feed stopped: staging failed; restart the daemon", "err", err)
	return err
}

// retryWithFreshSchema decodes record r of chunk c, which named a column
// the table's schema lacked, again after reloading the schema: the table
// may have changed since the decoders were built. The stager owns c by
// now, so the new mutations go to its end.
func (f *changeFeed) retryWithFreshSchema(ctx context.Context, c *chunk, r *kgo.Record, res recordResult) recordResult {
	if err := f.refresh(ctx, res.table); err != nil {
		f.d.log.Warn("reload the table schema for change events", "table", res.table.name, "err", err)
		return res
	}
	return f.decodeRecord(map[*eventsTable]*tableDecoder{}, c, r)
}

// deadLetter is the dead-letter record of a change event: the record as it
// was, with the reason and its origin in headers.
func (f *changeFeed) deadLetter(r *kgo.Record, reason error) *kgo.Record {
	f.d.log.Warn("change event sent to the dead-letter topic", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", reason)
	return &kgo.Record{Topic: r.Topic + ".dlq", Key: r.Key, Value: r.Value, Headers: deadLetterHeaders(r, reason.Error())}
}

// sendDeadLetters writes dead letters before the positions past them are
// committed, retrying until it succeeds or ctx ends (false).
func (f *changeFeed) sendDeadLetters(ctx context.Context, recs []*kgo.Record) bool {
	for attempt := 1; ; attempt++ {
		err := f.client.ProduceSync(ctx, recs...).FirstErr()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		delay := retryDelay(attempt)
		f.d.log.Warn("write to the change dead-letter topic failed; retrying", "err", err, "retry_in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

// topicNames lists the change topics, for logs.
func topicNames(topics []config.ChangeTopic) string {
	var out []string
	for _, t := range topics {
		out = append(out, t.Topic)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
