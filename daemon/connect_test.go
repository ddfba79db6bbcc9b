package daemon

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/testtables"
)

// controlSchema returns the writer schema that a control-event sample of
// ingest/testdata/connect carries (python3-avro wrote them from the sink's
// published schemas).
func controlSchema(t *testing.T, sample string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "ingest", "testdata", "connect", sample+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(b[4:])
	return b[8 : 8+n]
}

// avroDatum appends Avro binary values.
type avroDatum []byte

func (a avroDatum) long(v int64) avroDatum   { return binary.AppendVarint(a, v) }
func (a avroDatum) str(s string) avroDatum   { return append(a.long(int64(len(s))), s...) }
func (a avroDatum) fixed(b []byte) avroDatum { return append(a, b...) }

// controlEvent frames an Event datum (id, type, timestamp, group_id, then
// the payload) as Iceberg's AvroEncoderUtil does.
func controlEvent(schema []byte, typ int64, payload avroDatum) []byte {
	id := uuid.New()
	d := avroDatum(nil).fixed(id[:]).long(typ).long(1764400000000000).str("cg-orders")
	out := append([]byte("aVR\x01"), binary.BigEndian.AppendUint32(nil, uint32(len(schema)))...)
	out = append(out, schema...)
	return append(out, append(d, payload...)...)
}

// TestKafkaConnectControlTopic: with commit-format kafka-connect, an
// events-fed index follows the commits the control topic announces: each
// COMMIT_TO_TABLE names the snapshot, the DATA_COMPLETE events of its commit
// name the change-topic offsets; START_COMMIT, DATA_WRITTEN and
// COMMIT_COMPLETE are read without error; every index snapshot verifies and
// the control topic's offset is committed past every event.
func TestKafkaConnectControlTopic(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	h.cfg.Run.Kafka.CommitFormat = "kafka-connect"
	w := newEventWriter(h, 2)
	cdc := startCDC(h, 11)
	schemas := map[string][]byte{}
	for _, s := range []string{"start_commit", "data_complete", "commit_to_table", "commit_complete"} {
		schemas[s] = controlSchema(t, s)
	}
	dataWritten, err := os.ReadFile(filepath.Join("..", "ingest", "testdata", "connect", "data_written.bin"))
	if err != nil {
		t.Fatal(err)
	}
	produced := 0
	send := func(v []byte) {
		if err := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: commitTopic, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced++
	}
	// announce writes the control events of one commit of snap: two workers'
	// DATA_COMPLETE, one per change-topic partition.
	announce := func(snapshotID int64) {
		commit := uuid.New()
		send(controlEvent(schemas["start_commit"], 0, avroDatum(nil).fixed(commit[:])))
		send(dataWritten)
		for p, off := range w.next {
			assignments := avroDatum(nil).fixed(commit[:]).long(1).long(1). // union branch 1: the array; one item
											str(changeTopic).long(int64(p)).long(1).long(off).long(0). // offset set, no timestamp
											long(0)                                                    // end of the array
			send(controlEvent(schemas["data_complete"], 2, assignments))
		}
		ref := avroDatum(nil).str("default").long(1).str("test").long(0).str("orders")
		ctt := avroDatum(nil).fixed(commit[:]).fixed(ref).long(1).long(snapshotID).long(0)
		send(controlEvent(schemas["commit_to_table"], 3, ctt))
		send(controlEvent(schemas["commit_complete"], 4, avroDatum(nil).fixed(commit[:]).long(0)))
	}
	announce(h.tbl.CurrentSnapshot().SnapshotID)
	h.start(nil)
	for i := range 8 {
		var events []testtables.CDCEvent
		h.tbl, events = cdc.Commit(t, h.tbl, 6, testtables.EventForm(i%3))
		w.write(events)
		announce(h.tbl.CurrentSnapshot().SnapshotID)
	}
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	h.verifyAll("ev_customer")
	h.checkOnePerSnapshot("ev_customer")
	waitFor(t, "the control topic's offset passes every event", func() bool { return h.committed(0) == int64(produced) })
	if dl := h.deadLetters(); len(dl) != 0 {
		t.Errorf("%d control events went to the dead-letter topic: %s", len(dl), header(dl[0], HeaderError))
	}
}
