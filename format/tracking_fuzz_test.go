package format

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// FuzzReadTrackingFile feeds arbitrary bytes to the reader, which must
// either refuse them as corrupt or return entries that the writer accepts
// and that read back the same.
func FuzzReadTrackingFile(f *testing.F) {
	s := goldenSchema(f)
	golden, err := os.ReadFile(trackingGoldenPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(writeTracking(f, s, goldenEntries(), TrackingWriteOptions{Codec: codecNull}))
	f.Add(writeTracking(f, s, nil, TrackingWriteOptions{}))
	f.Add(writeTracking(f, s, goldenEntries(), TrackingWriteOptions{IndexUUID: "u", SnapshotID: 42}))
	f.Fuzz(func(t *testing.T, data []byte) {
		tf, err := ReadTrackingFile(bytes.NewReader(data), "fuzz.avro", s)
		if err != nil {
			var ce *CorruptFileError
			if !errors.As(err, &ce) || ce.Path != "fuzz.avro" {
				t.Fatalf("error %v (%T) is not a *CorruptFileError naming the file", err, err)
			}
			return
		}
		var buf bytes.Buffer
		opts := TrackingWriteOptions{Codec: codecNull, IndexUUID: tf.IndexUUID, SnapshotID: tf.SnapshotID}
		if err := WriteTrackingFile(&buf, s, tf.Entries, opts); err != nil {
			t.Fatalf("the writer refuses entries the reader accepted: %v", err)
		}
		again, err := ReadTrackingFile(&buf, "again.avro", s)
		if err != nil {
			t.Fatal(err)
		}
		if again.IndexUUID != tf.IndexUUID || again.SnapshotID != tf.SnapshotID {
			t.Fatalf("header read back as %q/%d, want %q/%d", again.IndexUUID, again.SnapshotID, tf.IndexUUID, tf.SnapshotID)
		}
		if d := diffEntries(s, again.Entries, tf.Entries); d != "" {
			t.Fatal(d)
		}
	})
}
