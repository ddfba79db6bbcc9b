package serve

import (
	"testing"
	"time"
)

// TestStaleMetadataOneReader: of the requests that find kept metadata
// stale, the first reads it again and the others go on with what is kept
// until it is done; fresh metadata is no one's to read.
func TestStaleMetadataOneReader(t *testing.T) {
	s := &Service{opts: Options{MetadataMaxAge: time.Hour}, loaded: map[string]loaded{}, refreshing: map[string]bool{}}
	if _, have, claimed := s.current("t/a.b"); have || claimed {
		t.Fatalf("nothing kept: have %t, claimed %t; want neither (the request loads it)", have, claimed)
	}
	s.keep("t/a.b", loaded{at: time.Now()})
	if _, have, claimed := s.current("t/a.b"); !have || claimed {
		t.Fatalf("fresh: have %t, claimed %t; want it kept and no one to read it", have, claimed)
	}
	s.keep("t/a.b", loaded{at: time.Now().Add(-2 * time.Hour), location: "old"})
	l, have, claimed := s.current("t/a.b")
	if !have || !claimed || l.location != "old" {
		t.Fatalf("stale, first request: have %t, claimed %t, %q; want it to read it again", have, claimed, l.location)
	}
	for range 3 {
		if l, have, claimed := s.current("t/a.b"); !have || claimed || l.location != "old" {
			t.Fatalf("stale, while another reads it: have %t, claimed %t, %q; want the kept one", have, claimed, l.location)
		}
	}
	s.refreshed("t/a.b")
	if _, _, claimed := s.current("t/a.b"); !claimed {
		t.Fatal("stale again after a refresh that kept nothing newer: want the next request to read it")
	}
}
