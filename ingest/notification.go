package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

	// Where the notification itself was read: topic, partition, offset. The
	// transport that read it fills them in.
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
