package staging

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortRecordsOrdersAsBytes: the radix sort of the seal puts records in
// the order of their bytes, whatever their lengths (shorter than the 16
// bytes it abbreviates, zero bytes against the padding), their shared
// bytes and their ties.
func TestSortRecordsOrdersAsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	alphabet := []byte{0x00, 0x01, 0x7f, 0x80, 0xff}
	for trial := range 300 {
		n := r.IntN(400)
		var buf []byte
		recs := make([]memRecord, 0, n)
		shared := r.IntN(18) // a prefix every record of the trial has
		prefix := make([]byte, shared)
		for i := range prefix {
			prefix[i] = alphabet[r.IntN(len(alphabet))]
		}
		for range n {
			rec := append([]byte(nil), prefix[:r.IntN(shared+1)]...)
			for range r.IntN(22) {
				rec = append(rec, alphabet[r.IntN(len(alphabet))])
			}
			keyLen := r.IntN(len(rec) + 1)
			recs = append(recs, memRecord{off: uint32(len(buf)), keyLen: uint32(keyLen), valLn: uint32(len(rec) - keyLen), count: int64(r.IntN(3) - 1)})
			buf = append(buf, rec...)
		}
		want := slices.Clone(recs)
		slices.SortStableFunc(want, func(a, b memRecord) int { return bytes.Compare(a.bytes(buf), b.bytes(buf)) })
		got := sortRecords(slices.Clone(recs), buf)
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d records sorted, want %d", trial, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i].bytes(buf), want[i].bytes(buf)) {
				t.Fatalf("trial %d (%d records, %d shared bytes): record %d is %x, want %x", trial, n, shared, i, got[i].bytes(buf), want[i].bytes(buf))
			}
		}
		// Every record is there once: the counts add up per distinct record.
		sum := func(rs []memRecord) map[string]int64 {
			m := map[string]int64{}
			for _, r := range rs {
				m[string(r.bytes(buf))] += r.count + 10
			}
			return m
		}
		gs, ws := sum(got), sum(want)
		for k, v := range ws {
			if gs[k] != v {
				t.Fatalf("trial %d: record %x sums to %d, want %d", trial, k, gs[k], v)
			}
		}
	}
}
