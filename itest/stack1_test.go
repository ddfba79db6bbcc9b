package itest

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// embedded is stack 1: franz-go's in-process Kafka broker, the SQL catalog
// on SQLite and the warehouse on local disk, all in this process or its
// temporary directory.
func embedded(t *testing.T) Parts {
	dir := t.TempDir()
	return Parts{
		Kafka:      newKfake(t),
		CatalogURI: "sqlite://" + filepath.Join(dir, "catalog.db"),
		Warehouse:  "file://" + filepath.Join(dir, "warehouse"),
	}
}

// newKfake starts an in-process Kafka broker for one test.
func newKfake(t *testing.T) []string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}

func TestScenariosEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("the scenarios run the streamidx binary and take a while; run without -short")
	}
	RunAll(t, embedded, Options{Crashes: 5})
}
