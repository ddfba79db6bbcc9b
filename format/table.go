package format

import (
	"errors"
	"fmt"
	"strings"

	"github.com/streamidx/streamidx/internal/tablemeta"
)

// ErrTableReplaced is returned (wrapped) by CheckTable when an index's
// table-uuid is not the UUID of the table it is paired with: the table was
// dropped and another one created under its name. The index describes rows
// that are gone; using it would answer for the wrong table, and updating it
// would mix two tables. Retrying does not help: drop the index and create it
// again on the new table.
var ErrTableReplaced = errors.New("index belongs to a table that no longer exists")

// ErrIncompatibleSchema is returned (wrapped) by CheckTable when the table's
// schema changed in a way the index definition does not survive: an
// identity column was dropped or became a type it cannot have, or an
// expression no longer produces its declared data-type (the spec: such a
// change requires a new index definition). Retrying does not help; the
// index must be dropped and created again.
var ErrIncompatibleSchema = errors.New("the table's schema changed in a way the index definition does not survive")

// CheckTable reports whether md is an index of tbl, and is what every reader
// and writer calls when it pairs an index with its table, before it uses
// either: the index's table-uuid must be the table's UUID (else
// ErrTableReplaced), and a SCALAR index's definition must follow the rules
// of Validate against the table's current schema (else an error wrapping
// ErrIncompatibleSchema and the broken rules, naming the columns). An index
// type this package does not implement is checked for its table only.
func CheckTable(md *Metadata, tbl *tablemeta.View) error {
	name := tbl.Name()
	current := tbl.UUID
	if !strings.EqualFold(strings.TrimSpace(md.TableUUID), current) {
		return fmt.Errorf("%w: index %s was built for table uuid %s, but table %s now has uuid %s: "+
			"the table was dropped and re-created; drop the index and create it again",
			ErrTableReplaced, md.IndexUUID, md.TableUUID, name, current)
	}
	if !md.Supported() {
		return nil
	}
	if err := validate(md, tbl.Schema(), tbl.ColumnName); err != nil {
		return fmt.Errorf("index %s no longer fits the current schema of table %s: %w: %w; "+
			"a schema change that breaks an index definition needs a new index: drop it and create it again",
			md.IndexUUID, name, ErrIncompatibleSchema, err)
	}
	return nil
}
