package format

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/table"
)

// ErrTableReplaced is returned (wrapped) by CheckTable when an index's
// table-uuid is not the UUID of the table it is paired with: the table was
// dropped and another one created under its name. The index describes rows
// that are gone; using it would answer for the wrong table, and updating it
// would mix two tables. Retrying does not help: drop the index and create it
// again on the new table.
var ErrTableReplaced = errors.New("index belongs to a table that no longer exists")

// CheckTable reports whether md is an index of tbl, and is what every reader
// and writer calls when it pairs an index with its table, before it uses
// either: the index's table-uuid must be the table's UUID (else
// ErrTableReplaced), and a SCALAR index's definition must follow the rules
// of Validate against the table's current schema (else an error matching
// ErrCorruption that wraps the broken rules). An index type this package
// does not implement is checked for its table only.
func CheckTable(md *Metadata, tbl *table.Table) error {
	name := strings.Join(tbl.Identifier(), ".")
	current := tbl.Metadata().TableUUID().String()
	if !strings.EqualFold(strings.TrimSpace(md.TableUUID), current) {
		return fmt.Errorf("%w: index %s was built for table uuid %s, but table %s now has uuid %s: "+
			"the table was dropped and re-created; drop the index and create it again",
			ErrTableReplaced, md.IndexUUID, md.TableUUID, name, current)
	}
	if !md.Supported() {
		return nil
	}
	if err := Validate(md, tbl.Schema()); err != nil {
		return fmt.Errorf("%w: index %s does not fit the current schema of table %s: %w", ErrCorruption, md.IndexUUID, name, err)
	}
	return nil
}
