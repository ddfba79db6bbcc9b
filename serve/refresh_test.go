package serve

import (
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/config"
)

// TestStaleMetadataOneReader: of the requests that find kept metadata
// stale, the first reads it again and the others go on with what is kept
// until it is done; fresh metadata is no one's to read.
func TestStaleMetadataOneReader(t *testing.T) {
	s := &Service{opts: Options{MetadataMaxAge: time.Hour}, loaded: map[string]loaded{}, refreshing: map[string]bool{}}
	if _, have, claimed, _ := s.current("t/a.b"); have || claimed {
		t.Fatalf("nothing kept: have %t, claimed %t; want neither (the request loads it)", have, claimed)
	}
	s.keep("t/a.b", loaded{at: time.Now()})
	if _, have, claimed, _ := s.current("t/a.b"); !have || claimed {
		t.Fatalf("fresh: have %t, claimed %t; want it kept and no one to read it", have, claimed)
	}
	s.keep("t/a.b", loaded{at: time.Now().Add(-2 * time.Hour), location: "old"})
	l, have, claimed, expired := s.current("t/a.b")
	if !have || !claimed || !expired || l.location != "old" {
		t.Fatalf("stale, first request: have %t, claimed %t, expired %t, %q; want it to read it again, first", have, claimed, expired, l.location)
	}
	for range 3 {
		if l, have, claimed, _ := s.current("t/a.b"); !have || claimed || l.location != "old" {
			t.Fatalf("stale, while another reads it: have %t, claimed %t, %q; want the kept one", have, claimed, l.location)
		}
	}
	s.refreshed("t/a.b")
	if _, _, claimed, _ := s.current("t/a.b"); !claimed {
		t.Fatal("stale again after a refresh that kept nothing newer: want the next request to read it")
	}
}

// TestStaleButNotExpired: metadata older than MetadataMaxAge but younger
// than twice that is answered from while it is read again; older than
// that, it is read before answering.
func TestStaleButNotExpired(t *testing.T) {
	s := &Service{opts: Options{MetadataMaxAge: time.Hour}, loaded: map[string]loaded{}, refreshing: map[string]bool{}}
	s.keep("t/a.b", loaded{at: time.Now().Add(-90 * time.Minute)})
	if _, have, claimed, expired := s.current("t/a.b"); !have || !claimed || expired {
		t.Fatalf("90 minutes old, an hour's age: have %t, claimed %t, expired %t; want it read again in the background", have, claimed, expired)
	}
}

// TestOptionsFromConfigMetadataAge: serve.metadata-max-age reaches the
// service.
func TestOptionsFromConfigMetadataAge(t *testing.T) {
	if got := OptionsFromConfig(config.ServeConfig{MetadataMaxAge: config.Duration(5 * time.Second)}).MetadataMaxAge; got != 5*time.Second {
		t.Errorf("MetadataMaxAge %s from a serve section of 5s", got)
	}
}
