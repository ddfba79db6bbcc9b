package format

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// Paths in index metadata and tracking files are classified as the table
// spec's "Paths in Metadata" does: a path with a URI scheme (s3:, file:,
// hdfs:) is absolute and used as it is; a path without one is relative and
// resolved against the index location, which must be absolute. streamidx
// writes absolute paths only.

// ErrAmbiguousPath is returned (wrapped) for a path in metadata that the
// table spec's rules do not give one meaning: a path without a scheme that
// starts with "/" (relative by the rules, yet plainly meant as a local
// absolute path), a one-letter scheme (a Windows drive), or a relative path
// with "." or ".." segments, which the rules do not resolve.
var ErrAmbiguousPath = errors.New("ambiguous path in index metadata")

// HasScheme reports whether p starts with a URI scheme (RFC 3986: a letter,
// then letters, digits, "+", "-" or ".", then ":") of two characters or
// more; a single letter is a Windows drive, not a scheme.
func HasScheme(p string) bool {
	i := strings.IndexByte(p, ':')
	if i < 2 {
		return false
	}
	for j := range i {
		c := p[j]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// ResolvePath returns the absolute form of path p found in the metadata of
// an index at location: p itself when it has a scheme, otherwise location
// and p joined by "/". It refuses, wrapping ErrAmbiguousPath, what the
// rules leave ambiguous, and an empty path.
func ResolvePath(location, p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path in index metadata")
	case HasScheme(p):
		return p, nil
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q has no URI scheme, so the table spec reads it as relative to the index location, "+
			"yet it starts with /: write it as a URI (file://%s)", ErrAmbiguousPath, p, p)
	case len(p) >= 2 && p[1] == ':':
		return "", fmt.Errorf("%w: %q starts with a drive letter, not a URI scheme", ErrAmbiguousPath, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: relative path %q has a %q segment, which the table spec does not resolve", ErrAmbiguousPath, p, seg)
		}
	}
	if !HasScheme(location) {
		return "", fmt.Errorf("resolve relative path %q: the index location %q is not absolute", p, location)
	}
	return strings.TrimRight(location, "/") + "/" + p, nil
}

// LocationURI returns the form in which streamidx writes a location: a URI
// with a scheme. A local absolute path becomes a file:// URI; a relative
// path is refused, since the metadata of an index gives it nothing to be
// relative to.
func LocationURI(loc string) (string, error) {
	switch {
	case HasScheme(loc):
		return loc, nil
	case path.IsAbs(loc):
		return FileURI(loc), nil
	}
	return "", fmt.Errorf("location %q is neither a URI nor an absolute path", loc)
}

// FileURI returns the file:// URI of a local absolute path with the
// characters a URI reserves ("#", "?", "%", spaces) percent-encoded, so
// that parsing the URI gives the path back: a directory named "a#b" is not
// the directory "a" with a fragment.
func FileURI(localPath string) string {
	return (&url.URL{Scheme: "file", Path: path.Clean(filepath.ToSlash(localPath))}).String()
}
