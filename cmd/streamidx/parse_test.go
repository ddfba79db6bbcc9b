package main

import "testing"

// TestParseLookupLeavesRefusalsToTheEngine: a lookup command line with a
// stray word or a flag given twice is not answered here (the last --where
// would win, or the flags after the word be lost): the engine refuses it.
func TestParseLookupLeavesRefusalsToTheEngine(t *testing.T) {
	base := []string{"lookup", "--table", "demo.orders", "--index", "pk"}
	for _, extra := range [][]string{
		{"--where", "order_id >= 5", "AND", "order_id < 7"},
		{"--where", "order_id = 5", "--where", "order_id = 6"},
		{"--where", "order_id = 5", "--index=pk"},
	} {
		if _, ok := parseLookup(append(append([]string{}, base...), extra...)); ok {
			t.Errorf("lookup %v: answered by the front program", extra)
		}
	}
	if _, ok := parseLookup(append(base, "--where", "order_id = 5", "--explain")); !ok {
		t.Error("a plain lookup is not answered by the front program")
	}
}
