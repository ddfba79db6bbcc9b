package tablescan

import (
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
)

// TopLevelColumns maps field IDs to the top-level columns that hold them,
// in first-use order, for Options.Columns: scans project whole top-level
// columns, so a nested field is read through its top-level struct. Metadata
// columns (_file, _pos) pass through.
func TopLevelColumns(schema *iceberg.Schema, ids []int) ([]int, error) {
	parents, err := iceberg.IndexParents(schema)
	if err != nil {
		return nil, fmt.Errorf("index schema parents: %w", err)
	}
	var out []int
	for _, id := range ids {
		for {
			p, ok := parents[id]
			if !ok {
				break
			}
			id = p
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}
