package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/testtables"
)

// removeDeletes drops delete files in a rewrite (iceberg-go's row delta
// removes a deletion vector only when it replaces it).
func removeDeletes(t *testing.T, tbl *table.Table, files ...iceberg.DataFile) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	rw := tx.NewRewrite(nil)
	for _, f := range files {
		rw.DeleteFile(f)
	}
	if err := rw.Commit(context.Background()); err != nil {
		t.Fatalf("stage removal of delete files: %v", err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit removal of delete files: %v", err)
	}
	return out
}

// TestDeltaRemovedDeleteFiles checks that dropping delete files brings their
// rows back, unless other deletes still cover them.
func TestDeltaRemovedDeleteFiles(t *testing.T) {
	indexes := testIndexes(t)
	tbl := newTable(t, "removed", 3)
	tbl, files := testtables.Append(t, tbl, rowsRange(0, 10, "a")...)
	eq := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{int64(4)}, []any{int64(6)})
	tbl = testtables.CommitDeletes(t, tbl, eq)
	checkLast(t, tbl, indexes, DeltaOptions{})

	// The deletion vector covers the rows the equality delete removed, so
	// neither it nor the removal of the equality delete changes the index.
	tbl, vec := testtables.AddDV(t, tbl, files[0], 4, 6)
	st := checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.FilesScanned != 1 || s.Inserts+s.Deletes != 0 {
		t.Errorf("vector over deleted rows: %+v, want one file read and no mutations", s)
	}
	tbl = removeDeletes(t, tbl, eq)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	// The shape of a rewrite-deletes snapshot: the rows are the same, which
	// the equality column alone shows; no row is read in full.
	for name, s := range st {
		if s.DeleteFilesRemoved != 1 || s.EqualityDeleteSlowPath != 0 || s.EqualityKeyReads != 1 || s.FilesScanned != 0 || s.Inserts+s.Deletes != 0 {
			t.Errorf("%s: equality delete removed under a vector: %+v, want the key column of one file read and no mutations", name, s)
		}
	}
	tbl = removeDeletes(t, tbl, vec)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.Inserts != 2 || s.Deletes != 0 {
		t.Errorf("vector removed: %+v, want the 2 rows back", s)
	}
	eq = testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{int64(1)})
	tbl = testtables.CommitDeletes(t, tbl, eq)
	checkLast(t, tbl, indexes, DeltaOptions{})
	tbl = removeDeletes(t, tbl, eq)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.Inserts != 1 || s.Deletes != 0 || s.EqualityDeleteSlowPath != 0 || s.FilesScanned != 1 {
		t.Errorf("equality delete removed: %+v, want its row back, read by position", s)
	}
}

// TestDeltaRandomHistory checks the delta of every commit of a random
// history of 30 commits mixing every commit kind.
func TestDeltaRandomHistory(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(version), 42))
			indexes := testIndexes(t)
			tbl := newTable(t, "random", version)
			nextName := 0
			randomRows := func(n int) [][]any {
				rows := make([][]any, n)
				for i := range rows {
					nextName++
					var name any = fmt.Sprintf("v%d", nextName%9)
					if r.IntN(10) == 0 {
						name = nil
					}
					rows[i] = row(int64(r.IntN(40)), name, []string{"a", "b"}[r.IntN(2)])
				}
				return rows
			}
			randomIDs := func() [][]any {
				var out [][]any
				for range 1 + r.IntN(3) {
					out = append(out, []any{int64(r.IntN(40))})
				}
				return out
			}
			kinds := map[string]int{}
			for commit := 0; commit < 30; commit++ {
				live := testtables.LiveFiles(t, tbl, iceberg.EntryContentData)
				kind := "append"
				if len(live) > 0 && commit > 1 {
					kind = []string{"append", "position delete", "equality delete", "upsert", "rewrite", "delete", "overwrite"}[r.IntN(7)]
				}
				switch kind {
				case "append":
					tbl, _ = testtables.Append(t, tbl, randomRows(1+r.IntN(12))...)
				case "position delete":
					f := live[r.IntN(len(live))]
					pos := []int64{r.Int64N(f.Count()), r.Int64N(f.Count())}
					if version == 3 {
						tbl, _ = testtables.AddDV(t, tbl, f, pos...)
						kind = "deletion vector"
					} else {
						tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f, Pos: uniq(pos)})
					}
				case "equality delete":
					tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldID}, randomIDs()...)
				case "upsert":
					ids := randomIDs()
					del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, ids...)
					rows := randomRows(len(ids))
					for i := range rows {
						rows[i][0] = ids[i][0]
					}
					tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
				case "rewrite":
					f := live[r.IntN(len(live))]
					rows := liveRowsOf(t, tbl, f.FilePath())
					if len(rows) == 0 {
						rows = randomRows(1) // a rewrite must write something
					}
					tbl, _ = testtables.Rewrite(t, tbl, []iceberg.DataFile{f}, rows...)
				case "delete":
					tbl = deleteWhere(t, tbl, iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(30+r.IntN(10))))
				case "overwrite":
					lo := int64(r.IntN(40))
					filter := iceberg.NewAnd(iceberg.GreaterThanEqual(iceberg.Reference("id"), lo), iceberg.LessThan(iceberg.Reference("id"), lo+5))
					tbl = overwriteWhere(t, tbl, filter, randomRows(1+r.IntN(3))...)
				}
				kinds[kind]++
				t.Logf("commit %d: %s (%s)", commit, kind, tbl.CurrentSnapshot().Summary.Operation)
				checkLast(t, tbl, indexes, DeltaOptions{})
				if t.Failed() {
					t.Fatalf("delta of commit %d (%s) is wrong", commit, kind)
				}
			}
			t.Logf("commit kinds: %v", kinds)
		})
	}
}

func uniq(pos []int64) []int64 {
	if len(pos) == 2 && pos[0] == pos[1] {
		return pos[:1]
	}
	if len(pos) == 2 && pos[0] > pos[1] {
		return []int64{pos[1], pos[0]}
	}
	return pos
}

// TestDeltaSchemaEvolution checks deltas across a type promotion, a rename
// and a new column: each side is read with its own snapshot's schema, and
// an unchanged row of an old file cancels out.
func TestDeltaSchemaEvolution(t *testing.T) {
	const fieldQty = 3
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: fieldID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: fieldName, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: fieldQty, Name: "qty", Type: iceberg.PrimitiveTypes.Int32},
	)
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "evolve", Schema: schema, FormatVersion: 2, RowGroupRows: 3})
	indexesOf := func(tbl *table.Table) []testIndex {
		md := format.Metadata{FormatVersion: format.FormatVersion, Type: format.TypeScalar, Location: "file:///idx", IndexUUID: "u", TableUUID: "t",
			IdentityFields: []int{fieldID, fieldQty},
			MaterializedFields: []format.ExprField{
				{FieldID: 1001, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.Ref{ID: format.FieldIDFile}},
				{FieldID: 1002, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: format.Ref{ID: format.FieldIDPos}},
				{FieldID: 1003, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.NewApply("truncate", format.IntLit(3), format.Ref{ID: fieldName})},
			},
			ClusterSpec: []int{fieldQty, fieldID}}
		is, err := format.NewIndexSchema(&md, tbl.Schema())
		if err != nil {
			t.Fatal(err)
		}
		return []testIndex{{"evolving", is}}
	}
	tbl, files := testtables.Append(t, tbl, []any{int64(1), "alpha", int32(10)}, []any{int64(2), "beta", int32(20)}, []any{int64(3), nil, nil}, []any{int64(4), "delta", int32(40)})
	checkLast(t, tbl, indexesOf(tbl), DeltaOptions{})
	tbl = testtables.UpdateSchema(t, tbl, func(u *table.UpdateSchema) {
		u.UpdateColumn([]string{"qty"}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: iceberg.PrimitiveTypes.Int64, Valid: true}})
		u.RenameColumn([]string{"name"}, "label")
		u.AddColumn([]string{"extra"}, iceberg.PrimitiveTypes.String, "", false, nil)
	})
	tbl, _ = testtables.Append(t, tbl, []any{int64(5), "epsilon", int64(1) << 40, "x"})
	checkLast(t, tbl, indexesOf(tbl), DeltaOptions{})
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{1}})
	st := checkLast(t, tbl, indexesOf(tbl), DeltaOptions{})
	if s := st["evolving"]; s.Deletes != 1 || s.Inserts != 0 {
		t.Errorf("position delete in a file of the old schema: %+v, want exactly 1 delete", s)
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldQty}, []any{int64(40)}, []any{nil})
	st = checkLast(t, tbl, indexesOf(tbl), DeltaOptions{})
	if s := st["evolving"]; s.Deletes != 2 || s.Inserts != 0 {
		t.Errorf("equality delete on the promoted column: %+v, want exactly 2 deletes", s)
	}
	// From the first snapshot, read with the schema before the promotion:
	// the surviving row of the old file cancels out.
	first := &tbl.Metadata().Snapshots()[0]
	st = checkDelta(t, tbl, first, tbl.CurrentSnapshot(), indexesOf(tbl), DeltaOptions{})
	if s := st["evolving"]; s.Deletes != 3 || s.Inserts != 1 {
		t.Errorf("delta across the schema change: %+v, want 3 deletes and 1 insert", s)
	}
}
