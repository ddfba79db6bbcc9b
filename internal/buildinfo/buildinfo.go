// Package buildinfo says which streamidx a binary is: the module version,
// the commit it was built from, and the versions of the libraries whose
// behaviour shows in its files (iceberg-go, arrow-go, franz-go, Pebble).
// It imports only the standard library.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// libraries are the dependencies named in the version line, by module
// path prefix and short name.
var libraries = []struct{ path, name string }{
	{"github.com/apache/iceberg-go", "iceberg-go"},
	{"github.com/apache/arrow-go/", "arrow-go"},
	{"github.com/twmb/franz-go", "franz-go"},
	{"github.com/cockroachdb/pebble/", "pebble"},
}

// String describes the running binary in one line, such as
//
//	streamidx-client devel (commit 94307aa0b1c2 2026-12-04T15:39:40Z, modified) go1.26.8; iceberg-go v0.7.0, arrow-go v18.8.0
//
// name is the binary's name. Libraries the binary does not link are left
// out.
func String(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information: not built with module support)"
	}
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", name, version)
	if rev != "" {
		fmt.Fprintf(&b, " (commit %.12s", rev)
		if at != "" {
			b.WriteString(" " + at)
		}
		if modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + bi.GoVersion)
	var libs []string
	for _, l := range libraries {
		for _, d := range bi.Deps {
			if strings.HasPrefix(d.Path, l.path) {
				if d.Replace != nil {
					d = d.Replace
				}
				libs = append(libs, l.name+" "+d.Version)
				break
			}
		}
	}
	if len(libs) > 0 {
		b.WriteString("; " + strings.Join(libs, ", "))
	}
	return b.String()
}
