package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Notification is streamidx's native commit notification: one JSON record
// per source table commit.
//
//	{"table": "ns.orders", "snapshot-id": 123, "sequence-number": 7,
//	 "timestamp-ms": 1764400000000, "offsets": {"orders-cdc": {"0": 1042}}}
//
// table and snapshot-id are required; offsets (the change-topic offsets the
// commit covers) are recorded in the index snapshot's properties.
type Notification struct {
	Table          string          `json:"table"`
	SnapshotID     int64           `json:"snapshot-id"`
	SequenceNumber int64           `json:"sequence-number"`
	TimestampMs    int64           `json:"timestamp-ms"`
	Offsets        json.RawMessage `json:"offsets,omitempty"`

	// Where the notification itself was read: topic, partition, offset.
	Topic     string `json:"-"`
	Partition int32  `json:"-"`
	Offset    int64  `json:"-"`
}

// DecodeNotification reads a native commit notification; unknown keys are
// an error, so a record of another format is not half-read.
func DecodeNotification(value []byte) (Notification, error) {
	var n Notification
	if len(bytes.TrimSpace(value)) == 0 {
		return n, errors.New("empty record")
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return n, fmt.Errorf("decode commit notification: %w", err)
	}
	if dec.More() {
		return n, errors.New("decode commit notification: trailing data")
	}
	parts := strings.Split(n.Table, ".")
	if len(parts) < 2 || strings.Contains(n.Table, "..") || parts[0] == "" || parts[len(parts)-1] == "" {
		return n, fmt.Errorf("commit notification: table %q: want namespace.table", n.Table)
	}
	if n.SnapshotID == 0 {
		return n, errors.New("commit notification: snapshot-id is required")
	}
	if len(n.Offsets) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(n.Offsets, &obj); err != nil {
			return n, fmt.Errorf("commit notification: offsets must be an object: %w", err)
		}
	}
	return n, nil
}

// NotifierOptions configure a Notifier.
type NotifierOptions struct {
	// Brokers are the Kafka bootstrap servers. Required.
	Brokers []string
	// Topic is the commit-notification topic. Required.
	Topic string
	// Group is the consumer group; processes sharing it share the topic's
	// partitions (scale-out by table). Default: streamidx.
	Group string
	// DeadLetterTopic receives records that cannot be decoded, with the
	// reason in the header "streamidx-error". Default: Topic + ".dlq".
	DeadLetterTopic string
	// Logger. Default: discard.
	Logger *slog.Logger
	// Registerer for the notifier's metrics. Default: none.
	Registerer prometheus.Registerer
	// ClientOptions are extra franz-go options (TLS, SASL, ...).
	ClientOptions []kgo.Opt
}

// Handler processes one notification. It returns when the notification's
// work is done (the index covers the snapshot) or cannot be done; its offset
// is committed only after it returns nil, so a crash redelivers it.
type Handler func(ctx context.Context, n Notification) error

// Notifier consumes commit notifications.
type Notifier struct {
	opts          NotifierOptions
	client        *kgo.Client
	handle        Handler
	decodeErrors  prometheus.Counter
	notifications prometheus.Counter
	log           *slog.Logger
}

// NewNotifier connects to Kafka; Run consumes.
func NewNotifier(opts NotifierOptions, handle Handler) (*Notifier, error) {
	if len(opts.Brokers) == 0 || opts.Topic == "" {
		return nil, errors.New("commit notifications: brokers and topic are required")
	}
	if opts.Group == "" {
		opts.Group = "streamidx"
	}
	if opts.DeadLetterTopic == "" {
		opts.DeadLetterTopic = opts.Topic + ".dlq"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{opts: opts, handle: handle, log: opts.Logger,
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_notification_decode_errors_total",
			Help: "Commit notifications that could not be decoded and went to the dead-letter topic."}),
		notifications: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamidx_ingest_notifications_total",
			Help: "Commit notifications processed."}),
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(n.decodeErrors, n.notifications)
	}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topic),
		kgo.AutoCommitMarks(),
		kgo.AllowAutoTopicCreation(),
	}, opts.ClientOptions...)
	client, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to kafka %v: %w", opts.Brokers, err)
	}
	n.client = client
	return n, nil
}

// Run consumes until ctx ends. Records are handled in order per partition.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		fetches := n.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			n.log.Warn("fetching commit notifications failed; retrying", "topic", topic, "partition", p, "err", err)
			fetchErr = err
		})
		var recs []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		for _, r := range recs {
			if err := n.process(ctx, r); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			n.client.MarkCommitRecords(r)
		}
		if fetchErr != nil && len(recs) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

func (n *Notifier) process(ctx context.Context, r *kgo.Record) error {
	note, err := DecodeNotification(r.Value)
	if err != nil {
		n.decodeErrors.Inc()
		n.log.Warn("undecodable commit notification sent to the dead-letter topic",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		dl := &kgo.Record{Topic: n.opts.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
			{Key: "streamidx-error", Value: []byte(err.Error())},
			{Key: "streamidx-source", Value: fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)},
		}}
		if err := n.client.ProduceSync(ctx, dl).FirstErr(); err != nil {
			return fmt.Errorf("write to dead-letter topic %s: %w", n.opts.DeadLetterTopic, err)
		}
		return nil
	}
	note.Topic, note.Partition, note.Offset = r.Topic, r.Partition, r.Offset
	if err := n.handle(ctx, note); err != nil {
		return fmt.Errorf("handle notification for %s snapshot %d: %w", note.Table, note.SnapshotID, err)
	}
	n.notifications.Inc()
	return nil
}

// Close commits marked offsets and leaves the group. It is idempotent.
func (n *Notifier) Close() {
	if n.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.client.CommitMarkedOffsets(ctx)
	n.client.Close()
	n.client = nil
}
