package verify

import "testing"

// TestDeleteSetHoldsAKeyOfAnyApplyingFile: a key that several delete files
// hold is deleted from a data file when any one of them applies to it, the
// first file that held it or a later one; not when none applies.
func TestDeleteSetHoldsAKeyOfAnyApplyingFile(t *testing.T) {
	s := &deleteSet{first: map[contentHash]int32{}, more: map[contentHash][]int32{}}
	k, other := contentHash{1, 2}, contentHash{3, 4}
	s.add(k, 0)
	s.add(k, 2)
	s.add(k, 2)
	s.add(k, 0)
	if got := s.more[k]; len(got) != 1 || got[0] != 2 {
		t.Errorf("files after the first holding the key: got %v, want [2]", got)
	}
	for _, c := range []struct {
		key     contentHash
		applies []bool
		want    bool
	}{
		{k, []bool{true, false, false}, true},
		{k, []bool{false, false, true}, true},
		{k, []bool{false, true, false}, false},
		{other, []bool{true, true, true}, false},
		// Its filter bit is k's: the map, not the filter, answers.
		{contentHash{99, k[1]}, []bool{true, true, true}, false},
		{contentHash{k[0], k[1] + filterBits}, []bool{true, true, true}, false},
	} {
		if got := s.holds(c.key, c.applies); got != c.want {
			t.Errorf("holds(%v, applies %v) = %v, want %v", c.key, c.applies, got, c.want)
		}
	}
}

// TestDeleteSetFilterHasNoFalseNegatives: every fingerprint added is held,
// however many share filter bits, and an empty set holds none.
func TestDeleteSetFilterHasNoFalseNegatives(t *testing.T) {
	empty := &deleteSet{first: map[contentHash]int32{}, more: map[contentHash][]int32{}}
	if empty.holds(contentHash{1, 2}, []bool{true}) {
		t.Error("an empty set holds a key")
	}
	s := &deleteSet{first: map[contentHash]int32{}, more: map[contentHash][]int32{}}
	var added []contentHash
	for i := range uint64(200_000) {
		h := contentHash{i * 0x9e3779b97f4a7c15, i*0xbf58476d1ce4e5b9 + i%7}
		s.add(h, int32(i%3))
		added = append(added, h)
	}
	applies := []bool{true, true, true}
	for _, h := range added {
		if !s.holds(h, applies) {
			t.Fatalf("added %v, not held", h)
		}
	}
}
