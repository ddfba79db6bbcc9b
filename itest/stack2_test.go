//go:build itest

package itest

import (
	"testing"

	"github.com/streamidx/streamidx/internal/testservers"
)

// servers is stack 2: PostgreSQL as the Iceberg SQL catalog, SeaweedFS as
// the S3 store of the warehouse and the index files (both started by
// scripts/itest-stack.sh), kfake for Kafka. indexCatalog picks where the
// index pointers live: sql (a table in the same Postgres database) or fs
// (conditional creates of metadata files on S3).
func servers(indexCatalog string) Stack {
	return func(t *testing.T) Parts {
		s3, _ := testservers.NewS3(t)
		return Parts{
			Kafka:        newKfake(t),
			CatalogURI:   testservers.Postgres(t),
			Warehouse:    s3.Root,
			IOProps:      s3.Props,
			IndexCatalog: indexCatalog,
		}
	}
}

func TestScenariosPostgresS3(t *testing.T) {
	RunAll(t, servers("sql"), Options{Crashes: 5})
}

// TestScenariosFSCatalogOnS3 runs the scenarios whose commits race with
// the index catalog kept on S3 itself: every commit is a conditional
// create of the next metadata version.
func TestScenariosFSCatalogOnS3(t *testing.T) {
	stack := servers("fs")
	t.Run("BuildAndVerify", func(t *testing.T) { BuildAndVerify(t, stack(t)) })
	t.Run("TwoDaemons", func(t *testing.T) { TwoDaemons(t, stack(t)) })
}
