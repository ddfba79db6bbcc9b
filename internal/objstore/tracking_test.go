package objstore

import (
	"fmt"
	"testing"
)

func TestTrackingCacheKeepsTheMostRecentlyUsed(t *testing.T) {
	c := newLRU[*Tracking](2, 0)
	files := map[string]*Tracking{}
	for _, p := range []string{"a", "b", "c"} {
		files[p] = &Tracking{}
	}
	c.put("a", files["a"], 1)
	c.put("b", files["b"], 1)
	if got, ok := c.get("a"); !ok || got != files["a"] { // a is now more recent than b
		t.Fatal("a is not cached")
	}
	c.put("c", files["c"], 1)
	var held []string
	for _, p := range []string{"a", "b", "c"} {
		if got, ok := c.get(p); ok {
			if got != files[p] {
				t.Errorf("%s maps to another tracking file", p)
			}
			held = append(held, p)
		}
	}
	if fmt.Sprint(held) != "[a c]" {
		t.Errorf("cache holds %v, want [a c]", held)
	}
	// A file decoded again (with another schema) replaces the cached one.
	again := &Tracking{}
	c.put("a", again, 1)
	if got, _ := c.get("a"); got != again {
		t.Error("put did not replace the cached decoding of a")
	}
}
