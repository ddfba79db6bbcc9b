package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
)

func TestGenTableRefusesImpossibleUpserts(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	c := newCLI(t, warehouse, "")
	for _, args := range [][]string{
		{"--rows", "0", "--upsert", "5"},
		{"--rows", "100", "--upsert", "-1"},
	} {
		code, out, errs := c.run(append([]string{"gen-table", "--table", "test.orders"}, args...)...)
		if code != exitError || !strings.Contains(errs, "--upsert") {
			t.Errorf("gen-table %s: exit %d, want %d with a message about --upsert\n%s%s", strings.Join(args, " "), code, exitError, out, errs)
		}
	}
	// Refused before anything was written: not even the table exists.
	if _, err := cat.LoadTable(context.Background(), table.Identifier{testtables.Namespace, "orders"}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("a refused gen-table left a table behind: %v", err)
	}
}
