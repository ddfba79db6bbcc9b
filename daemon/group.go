package daemon

import "fmt"

// actor is one long-lived part of the daemon. execute runs until interrupt
// is called (or it fails); interrupt must make execute return soon.
type actor struct {
	name      string
	execute   func() error
	interrupt func()
}

// group runs actors together, in the manner of a run group: when the first
// one returns, every actor is interrupted in the order they were added, and
// each is waited for before the next is interrupted, so shutdown is ordered
// (stop taking work, finish the work in hand, then stop serving).
type group struct {
	actors []actor
}

func (g *group) add(name string, execute func() error, interrupt func()) {
	g.actors = append(g.actors, actor{name: name, execute: execute, interrupt: interrupt})
}

type exit struct {
	i   int
	err error
}

// run starts every actor and returns after all have returned: the error of
// the first one to return, named after it, or nil.
func (g *group) run() error {
	if len(g.actors) == 0 {
		return nil
	}
	exits := make(chan exit, len(g.actors))
	for i, a := range g.actors {
		go func() { exits <- exit{i, a.execute()} }()
	}
	first := <-exits
	var err error
	if first.err != nil {
		err = fmt.Errorf("%s: %w", g.actors[first.i].name, first.err)
	}
	returned := map[int]bool{first.i: true}
	for i, a := range g.actors {
		if !returned[i] {
			a.interrupt()
		}
		for !returned[i] {
			e := <-exits
			returned[e.i] = true
		}
	}
	return err
}
