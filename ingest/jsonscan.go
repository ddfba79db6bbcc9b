package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// The change-event decoders read JSON with this scanner instead of
// encoding/json: an event of a wide table carries dozens of columns of which
// an index needs two or three, and decoding them all into maps costs more
// than the rest of the pipeline together. The scanner walks the bytes once,
// hands out values as slices of the input and skips whatever nobody asked
// for without allocating. It checks structure (balanced brackets, closed
// strings, valid literals and number syntax) everywhere, and string escapes
// and UTF-8 only in the values it decodes.

// maxJSONDepth bounds nesting, so that a hostile record cannot exhaust the
// stack of a recursive reader.
const maxJSONDepth = 64

var errJSONSyntax = errors.New("malformed JSON")

// jsonKind is the kind of a JSON value, from its first byte.
type jsonKind uint8

const (
	kindInvalid jsonKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

// scanner reads one JSON text held in data.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errJSONSyntax, s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the kind of the next value after white space.
func (s *scanner) peek() jsonKind {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return kindInvalid
	}
	switch c := s.data[s.pos]; {
	case c == 'n':
		return kindNull
	case c == 't' || c == 'f':
		return kindBool
	case c == '"':
		return kindString
	case c == '{':
		return kindObject
	case c == '[':
		return kindArray
	case c == '-' || c >= '0' && c <= '9':
		return kindNumber
	}
	return kindInvalid
}

// atEnd reports whether only white space is left.
func (s *scanner) atEnd() bool {
	s.skipSpace()
	return s.pos == len(s.data)
}

// expect consumes byte c after white space.
func (s *scanner) expect(c byte) error {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		return s.errorf("want %q", c)
	}
	s.pos++
	return nil
}

// literal consumes the literal word (null, true, false).
func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.errorf("invalid literal")
	}
	s.pos += len(word)
	return nil
}

// rawString consumes a string and returns its bytes between the quotes,
// still escaped, and whether it holds escapes.
func (s *scanner) rawString() (raw []byte, escaped bool, err error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start := s.pos
	// Most strings of a change event (member names, short values) end
	// within a few bytes, sooner than IndexByte gets going: look at those
	// bytes one by one first.
	for end := min(s.pos+shortString, len(s.data)); s.pos < end; {
		switch s.data[s.pos] {
		case '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, nil
		case '\\':
			escaped = true
			s.pos += 2 // the backslash and the escaped byte; unescape checks them
			if s.pos > len(s.data) {
				s.pos = len(s.data)
				return nil, false, s.errorf("string not closed")
			}
			continue
		}
		s.pos++
	}
	for {
		i := indexQuoteOrBackslash(s.data[s.pos:])
		if i < 0 {
			s.pos = len(s.data)
			return nil, false, s.errorf("string not closed")
		}
		s.pos += i
		if s.data[s.pos] == '"' {
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, nil
		}
		escaped = true
		s.pos += 2 // the backslash and the escaped byte; unescape checks them
		if s.pos > len(s.data) {
			s.pos = len(s.data)
			return nil, false, s.errorf("string not closed")
		}
	}
}

// shortString is how many bytes of a string rawString looks at one by one.
const shortString = 16

func indexQuoteOrBackslash(b []byte) int {
	q := bytes.IndexByte(b, '"')
	if q < 0 {
		return -1
	}
	if bs := bytes.IndexByte(b[:q], '\\'); bs >= 0 {
		return bs
	}
	return q
}

// stringValue consumes a string and returns it unescaped: a slice of the
// input when it holds no escapes, else appended to scratch. It checks
// escapes and UTF-8.
func (s *scanner) stringValue(scratch []byte) (value, newScratch []byte, err error) {
	raw, escaped, err := s.rawString()
	if err != nil {
		return nil, scratch, err
	}
	if !escaped {
		if !utf8.Valid(raw) {
			return nil, scratch, s.errorf("string is not valid UTF-8")
		}
		return raw, scratch, nil
	}
	start := len(scratch)
	out, err := unescapeJSON(scratch, raw)
	if err != nil {
		return nil, scratch, fmt.Errorf("%w at byte %d: %w", errJSONSyntax, s.pos, err)
	}
	if !utf8.Valid(out[start:]) {
		return nil, scratch, s.errorf("string is not valid UTF-8")
	}
	return out[start:], out, nil
}

// unescapeJSON appends the unescaped form of the inside of a JSON string.
func unescapeJSON(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c < 0x20 {
			return dst, errors.New("control character in string")
		}
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			for _, b := range raw[i : i+j] {
				if b < 0x20 {
					return dst, errors.New("control character in string")
				}
			}
			dst = append(dst, raw[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(raw) {
			return dst, errors.New("escape at end of string")
		}
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return dst, errors.New("invalid \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, ok = hex4(raw[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, fmt.Errorf("invalid escape \\%c", e)
		}
		i += 2
	}
	return dst, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number consumes a number and returns its bytes, checking the grammar.
func (s *scanner) number() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		return nil, s.errorf("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return nil, s.errorf("invalid number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return nil, s.errorf("invalid number")
		}
	}
	s.pos = i
	return d[start:i], nil
}

// skip consumes one value of any kind and returns its bytes.
func (s *scanner) skip() ([]byte, error) {
	return s.skipDepth(0)
}

func (s *scanner) skipDepth(depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, s.errorf("nested deeper than %d", maxJSONDepth)
	}
	kind := s.peek()
	start := s.pos
	var err error
	switch kind {
	case kindNull:
		err = s.literal("null")
	case kindBool:
		if s.data[s.pos] == 't' {
			err = s.literal("true")
		} else {
			err = s.literal("false")
		}
	case kindNumber:
		_, err = s.number()
	case kindString:
		_, _, err = s.rawString()
	case kindObject:
		err = s.object(func(_ []byte, _ bool) error {
			_, err := s.skipDepth(depth + 1)
			return err
		})
	case kindArray:
		err = s.array(func() error {
			_, err := s.skipDepth(depth + 1)
			return err
		})
	default:
		return nil, s.errorf("value expected")
	}
	if err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// object consumes an object, calling member for each key (raw, still
// escaped when escaped is true) with the scanner at its value, which member
// must consume.
func (s *scanner) object(member func(key []byte, escaped bool) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		key, escaped, err := s.rawString()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(key, escaped); err != nil {
			return err
		}
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.errorf("object not closed")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want , or }")
		}
	}
}

// array consumes an array, calling elem with the scanner at each element.
func (s *scanner) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.errorf("array not closed")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("want , or ]")
		}
	}
}

// keyString returns an object key unescaped, in scratch when it holds
// escapes.
func keyString(key []byte, escaped bool, scratch []byte) ([]byte, []byte, error) {
	if !escaped {
		return key, scratch, nil
	}
	start := len(scratch)
	out, err := unescapeJSON(scratch, key)
	if err != nil {
		return nil, scratch, fmt.Errorf("%w: key: %w", errJSONSyntax, err)
	}
	return out[start:], out, nil
}
