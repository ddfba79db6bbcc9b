package main

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uptrace/bun/driver/sqliteshim"
)

// TestFullCatalogDiskIsNamed: when the disk under the SQLite catalog is
// full, SQLite reports "database or disk is full (13)" or, growing its WAL
// index, "disk I/O error (4874)"; the command line says that the catalog's
// disk is full and where the database is. The error is a real one from the
// driver: a database capped at a few pages fills up as a full disk does.
func TestFullCatalogDiskIsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open(sqliteshim.ShimName, "file:"+path+"?_pragma=max_page_count(4)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		_, full = db.Exec(`INSERT INTO t VALUES (?)`, strings.Repeat("x", 4000))
	}
	if full == nil {
		t.Fatal("the capped database never filled up")
	}
	g := &globals{sqlitePath: path}
	wrapped := fmt.Errorf("commit index pk: %w", full)
	got := g.explain(wrapped)
	for _, want := range []string{"the disk of the catalog database " + path + " is full", full.Error()} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("explained as %q, want it to hold %q", got, want)
		}
	}
	if !errors.Is(got, full) {
		t.Errorf("the explanation lost the error it explains")
	}
	if other := errors.New("table not found"); g.explain(other) != other {
		t.Errorf("another error was changed: %v", g.explain(other))
	}
	// The code the driver gives when the WAL index cannot grow on a full
	// disk ("disk I/O error (4874)", SQLITE_IOERR_SHMSIZE), as an operator
	// saw it: named the same way.
	shm := fmt.Errorf("commit index pk: %w", sqliteCodeError(4874))
	if got := g.explain(shm); !strings.Contains(got.Error(), "the disk of the catalog database "+path+" is full") || !errors.Is(got, shm) {
		t.Errorf("SQLITE_IOERR_SHMSIZE explained as %q", got)
	}
	if other := fmt.Errorf("x: %w", sqliteCodeError(5)); g.explain(other) != other { // SQLITE_BUSY
		t.Errorf("SQLITE_BUSY was explained as a full disk: %v", g.explain(other))
	}
}

// sqliteCodeError is an error carrying an SQLite result code, as the
// driver's errors do.
type sqliteCodeError int

func (e sqliteCodeError) Error() string { return fmt.Sprintf("disk I/O error (%d)", int(e)) }
func (e sqliteCodeError) Code() int     { return int(e) }
