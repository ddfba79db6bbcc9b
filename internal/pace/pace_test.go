package pace

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source for a gate.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }

func testGate(longAfter time.Duration) (*Gate, *clock) {
	g := NewGate(longAfter)
	c := &clock{}
	c.t.Store(time.Now().UnixNano())
	g.now = c.now
	return g, c
}

// yieldReturns runs j.Yield on its own goroutine; its error arrives on the channel.
func yieldReturns(t *testing.T, j *Job) (returned chan error) {
	t.Helper()
	returned = make(chan error, 1)
	go func() { returned <- j.Yield(context.Background()) }()
	return returned
}

func TestLongJobWaitsWhileShortJobRuns(t *testing.T) {
	g, c := testGate(100 * time.Millisecond)
	long := g.Start()
	defer long.Done()
	c.advance(time.Minute) // long has run a minute: its budget is a second per wait
	if err := long.Yield(context.Background()); err != nil {
		t.Fatal(err)
	}
	if long.Short() {
		t.Fatal("a job that ran past the threshold is still short")
	}
	short := g.Start()
	done := yieldReturns(t, long)
	select {
	case <-done:
		t.Fatal("the long job did not wait while a short job ran")
	case <-time.After(50 * time.Millisecond):
	}
	short.Done()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long job still waits after the short job ended")
	}
	if n, _ := g.Waited(); n != 1 {
		t.Fatalf("waits = %d, want 1", n)
	}
}

func TestShortJobNeverWaits(t *testing.T) {
	g, _ := testGate(time.Hour)
	other := g.Start()
	defer other.Done()
	j := g.Start()
	defer j.Done()
	for range 100 {
		if err := j.Yield(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := g.Waited(); n != 0 {
		t.Fatalf("a short job waited %d times", n)
	}
}

func TestLongJobDoesNotWaitForLongJobs(t *testing.T) {
	g, c := testGate(100 * time.Millisecond)
	a, b := g.Start(), g.Start()
	defer a.Done()
	defer b.Done()
	c.advance(time.Second)
	// a becomes long first, while b, not yet asked, still counts as short.
	_ = a.Yield(context.Background())
	_ = b.Yield(context.Background()) // b becomes long: no short job left
	done := yieldReturns(t, a)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a long job waits for another long job")
	}
	if n, _ := g.Waited(); n != 0 {
		t.Fatalf("waits = %d, want 0", n)
	}
}

func TestLongJobWaitsNoLongerThanItRan(t *testing.T) {
	g := NewGate(time.Millisecond) // the real clock: budgets are real time
	long := g.Start()
	defer long.Done()
	time.Sleep(20 * time.Millisecond)
	_ = long.Yield(context.Background()) // now long
	short := g.Start()
	defer short.Done() // never ends while long yields
	ran := time.Since(long.began)
	var yields int
	for {
		_, before := g.Waited()
		_ = long.Yield(context.Background())
		if _, after := g.Waited(); after == before {
			break // its budget is spent: it goes on
		}
		if yields++; yields > 100 {
			t.Fatal("a long job kept waiting for a short job that never ends")
		}
	}
	_, total := g.Waited()
	// Each wait is at most what the job ran minus twice what it waited:
	// the waits together stay below the time the job has existed.
	if total > time.Since(long.began) {
		t.Fatalf("waited %v in all, more than the %v the job has existed (it had run %v)", total, time.Since(long.began), ran)
	}
	if total == 0 {
		t.Fatal("the long job never waited")
	}
}

func TestYieldEndsWithContext(t *testing.T) {
	g, c := testGate(time.Millisecond)
	long := g.Start()
	defer long.Done()
	c.advance(time.Hour)
	_ = long.Yield(context.Background())
	short := g.Start()
	defer short.Done()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- long.Yield(ctx) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Yield = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Yield did not return when its context ended")
	}
}

func TestNilGateAndJob(t *testing.T) {
	var g *Gate
	j := g.Start()
	if err := j.Yield(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.Done()
	if n, d := g.Waited(); n != 0 || d != 0 {
		t.Fatal("a nil gate reports waits")
	}
}

func TestDoneTwiceAndAfterDemotion(t *testing.T) {
	g, c := testGate(time.Millisecond)
	a := g.Start()
	c.advance(time.Second)
	_ = a.Yield(context.Background())
	a.Done()
	a.Done()
	b := g.Start()
	b.Done()
	b.Done()
	if n := g.short.Load(); n != 0 {
		t.Fatalf("short jobs counted after all ended: %d", n)
	}
}
