package config

import (
	"testing"
)

// The example file documents every key with its default: loading it must
// give exactly the defaults.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	c, err := Load("../../configs/streamidx.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.String() != d.String() {
		t.Errorf("example differs from defaults:\n%s\nvs\n%s", c, d)
	}
}
