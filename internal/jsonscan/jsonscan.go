// Package jsonscan reads JSON without encoding/json, for the hot paths
// that need a few members of large documents: the change-event decoders
// (an event of a wide table carries dozens of columns of which an index
// needs two or three, and decoding them all into maps cost more than the
// rest of the pipeline together) and the table metadata files a lookup
// process reads (thousands of snapshots, each with a summary nobody asks
// for). The Scanner walks the bytes once, hands out values as slices of the
// input and skips whatever nobody asked for without allocating. It checks
// structure (balanced brackets, closed strings, valid literals and number
// syntax) everywhere, and string escapes and UTF-8 only in the values it
// decodes.
//
// Concurrency: a Scanner is used by one goroutine at a time.
package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting, so that a hostile record cannot exhaust the
// stack of a recursive reader.
const MaxDepth = 64

// ErrSyntax is returned (wrapped, with the byte offset) for input that is
// not JSON.
var ErrSyntax = errors.New("malformed JSON")

// Kind is the kind of a JSON value, from its first byte.
type Kind uint8

// The kinds of JSON values; Invalid where no value starts.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Object
	Array
)

// Scanner reads one JSON text held in Data; Pos is the offset of the next
// byte to read.
type Scanner struct {
	Data []byte
	Pos  int
}

// Errorf is an error wrapping ErrSyntax at the scanner's offset.
func (s *Scanner) Errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrSyntax, s.Pos, fmt.Sprintf(format, args...))
}

// SkipSpace consumes white space.
func (s *Scanner) SkipSpace() {
	for s.Pos < len(s.Data) {
		switch s.Data[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek returns the kind of the next value after white space.
func (s *Scanner) Peek() Kind {
	s.SkipSpace()
	if s.Pos >= len(s.Data) {
		return Invalid
	}
	switch c := s.Data[s.Pos]; {
	case c == 'n':
		return Null
	case c == 't' || c == 'f':
		return Bool
	case c == '"':
		return String
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == '-' || c >= '0' && c <= '9':
		return Number
	}
	return Invalid
}

// AtEnd reports whether only white space is left.
func (s *Scanner) AtEnd() bool {
	s.SkipSpace()
	return s.Pos == len(s.Data)
}

// Expect consumes byte c after white space.
func (s *Scanner) Expect(c byte) error {
	s.SkipSpace()
	if s.Pos >= len(s.Data) || s.Data[s.Pos] != c {
		return s.Errorf("want %q", c)
	}
	s.Pos++
	return nil
}

// Literal consumes the literal word (null, true, false).
func (s *Scanner) Literal(word string) error {
	if !bytes.HasPrefix(s.Data[s.Pos:], []byte(word)) {
		return s.Errorf("invalid literal")
	}
	s.Pos += len(word)
	return nil
}

// RawString consumes a string and returns its bytes between the quotes,
// still escaped, and whether it holds escapes.
func (s *Scanner) RawString() (raw []byte, escaped bool, err error) {
	if err := s.Expect('"'); err != nil {
		return nil, false, err
	}
	start := s.Pos
	// Most strings of a change event (member names, short values) end
	// within a few bytes, sooner than IndexByte gets going: look at those
	// bytes one by one first.
	for end := min(s.Pos+shortString, len(s.Data)); s.Pos < end; {
		switch s.Data[s.Pos] {
		case '"':
			raw = s.Data[start:s.Pos]
			s.Pos++
			return raw, escaped, nil
		case '\\':
			escaped = true
			s.Pos += 2 // the backslash and the escaped byte; unescape checks them
			if s.Pos > len(s.Data) {
				s.Pos = len(s.Data)
				return nil, false, s.Errorf("string not closed")
			}
			continue
		}
		s.Pos++
	}
	for {
		i := indexQuoteOrBackslash(s.Data[s.Pos:])
		if i < 0 {
			s.Pos = len(s.Data)
			return nil, false, s.Errorf("string not closed")
		}
		s.Pos += i
		if s.Data[s.Pos] == '"' {
			raw = s.Data[start:s.Pos]
			s.Pos++
			return raw, escaped, nil
		}
		escaped = true
		s.Pos += 2 // the backslash and the escaped byte; unescape checks them
		if s.Pos > len(s.Data) {
			s.Pos = len(s.Data)
			return nil, false, s.Errorf("string not closed")
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

// StringValue consumes a string and returns it unescaped: a slice of the
// input when it holds no escapes, else appended to scratch. It checks
// escapes and UTF-8.
func (s *Scanner) StringValue(scratch []byte) (value, newScratch []byte, err error) {
	raw, escaped, err := s.RawString()
	if err != nil {
		return nil, scratch, err
	}
	if !escaped {
		if !utf8.Valid(raw) {
			return nil, scratch, s.Errorf("string is not valid UTF-8")
		}
		return raw, scratch, nil
	}
	start := len(scratch)
	out, err := Unescape(scratch, raw)
	if err != nil {
		return nil, scratch, fmt.Errorf("%w at byte %d: %w", ErrSyntax, s.Pos, err)
	}
	if !utf8.Valid(out[start:]) {
		return nil, scratch, s.Errorf("string is not valid UTF-8")
	}
	return out[start:], out, nil
}

// Unescape appends the unescaped form of the inside of a JSON string.
func Unescape(dst, raw []byte) ([]byte, error) {
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

// Number consumes a number and returns its bytes, checking the grammar.
func (s *Scanner) Number() ([]byte, error) {
	s.SkipSpace()
	start := s.Pos
	d := s.Data
	i := s.Pos
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
		s.Pos = i
		return nil, s.Errorf("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.Pos = i
			return nil, s.Errorf("invalid number")
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
			s.Pos = i
			return nil, s.Errorf("invalid number")
		}
	}
	s.Pos = i
	return d[start:i], nil
}

// Skip consumes one value of any kind and returns its bytes.
func (s *Scanner) Skip() ([]byte, error) {
	return s.SkipDepth(0)
}

// SkipDepth is Skip of a value nested depth levels deep, for a reader that
// counts the levels it entered itself.
func (s *Scanner) SkipDepth(depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, s.Errorf("nested deeper than %d", MaxDepth)
	}
	kind := s.Peek()
	start := s.Pos
	var err error
	switch kind {
	case Null:
		err = s.Literal("null")
	case Bool:
		if s.Data[s.Pos] == 't' {
			err = s.Literal("true")
		} else {
			err = s.Literal("false")
		}
	case Number:
		_, err = s.Number()
	case String:
		_, _, err = s.RawString()
	case Object:
		err = s.Object(func(_ []byte, _ bool) error {
			_, err := s.SkipDepth(depth + 1)
			return err
		})
	case Array:
		err = s.Array(func() error {
			_, err := s.SkipDepth(depth + 1)
			return err
		})
	default:
		return nil, s.Errorf("value expected")
	}
	if err != nil {
		return nil, err
	}
	return s.Data[start:s.Pos], nil
}

// Object consumes an object, calling member for each key (raw, still
// escaped when escaped is true) with the Scanner at its value, which member
// must consume.
func (s *Scanner) Object(member func(key []byte, escaped bool) error) error {
	if err := s.Expect('{'); err != nil {
		return err
	}
	s.SkipSpace()
	if s.Pos < len(s.Data) && s.Data[s.Pos] == '}' {
		s.Pos++
		return nil
	}
	for {
		key, escaped, err := s.RawString()
		if err != nil {
			return err
		}
		if err := s.Expect(':'); err != nil {
			return err
		}
		if err := member(key, escaped); err != nil {
			return err
		}
		s.SkipSpace()
		if s.Pos >= len(s.Data) {
			return s.Errorf("object not closed")
		}
		switch s.Data[s.Pos] {
		case ',':
			s.Pos++
		case '}':
			s.Pos++
			return nil
		default:
			return s.Errorf("want , or }")
		}
	}
}

// Members is Object with the keys unescaped: member gets each key, held in
// *keys when it had escapes (valid until the next key), with the scanner at
// its value.
func (s *Scanner) Members(keys *[]byte, member func(key []byte) error) error {
	return s.Object(func(raw []byte, escaped bool) error {
		k, buf, err := KeyString(raw, escaped, (*keys)[:0])
		if err != nil {
			return err
		}
		*keys = buf
		return member(k)
	})
}

// Array consumes an array, calling elem with the Scanner at each element.
// Its loop is Object's, written again on purpose: Object built on one
// shared loop (a closure per member) decoded Debezium events 5-7% slower
// (BenchmarkDecodeDebezium*, 2026-12-04, three alternating runs each).
func (s *Scanner) Array(elem func() error) error {
	if err := s.Expect('['); err != nil {
		return err
	}
	s.SkipSpace()
	if s.Pos < len(s.Data) && s.Data[s.Pos] == ']' {
		s.Pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.SkipSpace()
		if s.Pos >= len(s.Data) {
			return s.Errorf("array not closed")
		}
		switch s.Data[s.Pos] {
		case ',':
			s.Pos++
		case ']':
			s.Pos++
			return nil
		default:
			return s.Errorf("want , or ]")
		}
	}
}

// KeyString returns an object key unescaped, in scratch when it holds
// escapes.
func KeyString(key []byte, escaped bool, scratch []byte) ([]byte, []byte, error) {
	if !escaped {
		return key, scratch, nil
	}
	start := len(scratch)
	out, err := Unescape(scratch, key)
	if err != nil {
		return nil, scratch, fmt.Errorf("%w: key: %w", ErrSyntax, err)
	}
	return out[start:], out, nil
}
