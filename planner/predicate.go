package planner

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Op is the operator of one condition.
type Op int

// The operators of the predicate language. A predicate is an AND of
// conditions, each one column against literals.
const (
	OpEq        Op = iota // col = v
	OpLt                  // col < v
	OpLe                  // col <= v
	OpGt                  // col > v
	OpGe                  // col >= v
	OpIn                  // col IN (v, ...)
	OpBetween             // col BETWEEN lo AND hi (both inclusive)
	OpIsNull              // col IS NULL
	OpIsNotNull           // col IS NOT NULL
)

func (o Op) String() string {
	switch o {
	case OpEq:
		return "="
	case OpLt:
		return "<"
	case OpLe:
		return "<="
	case OpGt:
		return ">"
	case OpGe:
		return ">="
	case OpIn:
		return "IN"
	case OpBetween:
		return "BETWEEN"
	case OpIsNull:
		return "IS NULL"
	case OpIsNotNull:
		return "IS NOT NULL"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// LiteralKind is the syntactic form of a literal. Its type comes from the
// column it is compared with, when the predicate is resolved against an
// index.
type LiteralKind int

// Literal forms.
const (
	LitString LiteralKind = iota // 'text', with '' for a quote
	LitNumber                    // 42, -1.5, 2e10
	LitBool                      // TRUE, FALSE
	LitBytes                     // X'00ff'
)

// Literal is one literal as written. Text is the unquoted string, the
// number's digits, "true"/"false", or the hexadecimal digits of a bytes
// literal. Pos is its 1-based byte position in the predicate text.
type Literal struct {
	Kind LiteralKind
	Text string
	Pos  int
}

func (l Literal) String() string {
	switch l.Kind {
	case LitString:
		return "'" + strings.ReplaceAll(l.Text, "'", "''") + "'"
	case LitBytes:
		return "X'" + l.Text + "'"
	case LitBool:
		return strings.ToUpper(l.Text)
	}
	return l.Text
}

// Cond is one condition: a column, an operator and its literals (none for
// IS [NOT] NULL, two for BETWEEN). Column is a source column name (dotted
// for a nested field) or the name of an index field, such as
// customer_id_bucket_8 or _file. Pos is the column's 1-based byte position.
type Cond struct {
	Column string
	Op     Op
	Args   []Literal
	Pos    int
}

// String writes the condition in the predicate language, so that it
// parses back to the same condition.
func (c Cond) String() string {
	col := quoteColumn(c.Column)
	switch c.Op {
	case OpIsNull, OpIsNotNull:
		return col + " " + c.Op.String()
	case OpBetween:
		return fmt.Sprintf("%s BETWEEN %s AND %s", col, c.Args[0], c.Args[1])
	case OpIn:
		parts := make([]string, len(c.Args))
		for i, a := range c.Args {
			parts[i] = a.String()
		}
		return fmt.Sprintf("%s IN (%s)", col, strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%s %s %s", col, c.Op, c.Args[0])
}

// quoteColumn returns a column name as it must be written: bare when the
// lexer reads it as one name, else in double quotes.
func quoteColumn(name string) string {
	plain := name != "" && !isKeyword(name) && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".") &&
		!strings.Contains(name, "..")
	for i, r := range name {
		if !plain {
			break
		}
		switch {
		case r == '_' || unicode.IsLetter(r):
		case i > 0 && (r == '.' || unicode.IsDigit(r)):
		default:
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Predicate is a parsed --where text: an AND of conditions. The empty
// predicate matches every entry.
type Predicate struct {
	Text  string
	Conds []Cond
}

func (p *Predicate) String() string {
	parts := make([]string, len(p.Conds))
	for i, c := range p.Conds {
		parts[i] = c.String()
	}
	return strings.Join(parts, " AND ")
}

// PredicateError reports a predicate that cannot be parsed or that the
// index cannot answer, at a 1-based byte position of the text (0 when it is
// about the whole predicate), so a person can find the mistake.
type PredicateError struct {
	Text string
	Pos  int
	Msg  string
}

func (e *PredicateError) Error() string {
	if e.Pos <= 0 {
		return "where: " + e.Msg
	}
	return fmt.Sprintf("where: position %d (%s): %s", e.Pos, near(e.Text, e.Pos), e.Msg)
}

// near quotes the text from pos on, shortened, or says it is the end.
func near(text string, pos int) string {
	if pos > len(text) {
		return "at the end"
	}
	rest := text[pos-1:]
	if len(rest) > 20 {
		cut := 20
		for cut > 0 && !utf8.RuneStart(rest[cut]) {
			cut--
		}
		rest = rest[:cut] + "..."
	}
	return fmt.Sprintf("at %q", rest)
}

// Parse reads the predicate language of `streamidx lookup --where`:
//
//	predicate := cond { AND cond }
//	cond      := column ( = | < | <= | > | >= ) literal
//	           | column IN ( literal { , literal } )
//	           | column BETWEEN literal AND literal
//	           | column IS [NOT] NULL
//	column    := name { . name } | "quoted name"
//	literal   := 'string' | number | TRUE | FALSE | X'hex'
//
// Keywords are case-insensitive. Literals are typed later by their column:
// timestamps and dates are quoted ISO 8601 ('2026-11-01T00:00:00Z',
// '2026-11-01'), NaN and infinities of float columns are 'NaN',
// 'Infinity' and '-Infinity'. Parse checks only the syntax; errors are
// *PredicateError with the position of the mistake.
func Parse(text string) (*Predicate, error) {
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{text: text, toks: toks}
	pred := &Predicate{Text: text}
	if p.peek().kind == tokEOF {
		return pred, nil
	}
	for {
		c, err := p.cond()
		if err != nil {
			return nil, err
		}
		pred.Conds = append(pred.Conds, c)
		t := p.next()
		switch {
		case t.kind == tokEOF:
			return pred, nil
		case t.isKeyword("AND"):
			continue
		case t.isKeyword("OR"):
			return nil, p.errAt(t.pos, "OR is not supported: a lookup is an AND of conditions; use IN for alternatives of one column")
		default:
			return nil, p.errAt(t.pos, "expected AND or the end, found %s", t.describe())
		}
	}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokQuotedIdent
	tokString
	tokNumber
	tokBytes
	tokOp
	tokLParen
	tokRParen
	tokComma
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based
}

func (t token) isKeyword(kw string) bool {
	return t.kind == tokIdent && strings.EqualFold(t.text, kw)
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "the end"
	case tokString:
		return fmt.Sprintf("string '%s'", t.text)
	case tokQuotedIdent:
		return fmt.Sprintf("%q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

func lex(text string) ([]token, error) {
	var toks []token
	i := 0
	fail := func(pos int, format string, args ...any) error {
		return &PredicateError{Text: text, Pos: pos + 1, Msg: fmt.Sprintf(format, args...)}
	}
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		start := i
		switch {
		case unicode.IsSpace(r):
			i += size
		case r == '(':
			toks = append(toks, token{tokLParen, "(", start + 1})
			i++
		case r == ')':
			toks = append(toks, token{tokRParen, ")", start + 1})
			i++
		case r == ',':
			toks = append(toks, token{tokComma, ",", start + 1})
			i++
		case r == '=' || r == '<' || r == '>' || r == '!':
			op := string(r)
			if i+1 < len(text) && (text[i+1] == '=' || (r == '<' && text[i+1] == '>')) {
				op = text[i : i+2]
			}
			if op == "!" {
				return nil, fail(start, "unexpected '!'")
			}
			toks = append(toks, token{tokOp, op, start + 1})
			i += len(op)
		case r == '\'':
			s, n, ok := quoted(text[i:], '\'')
			if !ok {
				return nil, fail(start, "string literal is not closed with '")
			}
			toks = append(toks, token{tokString, s, start + 1})
			i += n
		case r == '"':
			s, n, ok := quoted(text[i:], '"')
			if !ok {
				return nil, fail(start, "quoted column name is not closed with \"")
			}
			if s == "" {
				return nil, fail(start, "empty column name")
			}
			toks = append(toks, token{tokQuotedIdent, s, start + 1})
			i += n
		case (r == 'x' || r == 'X') && i+1 < len(text) && text[i+1] == '\'':
			s, n, ok := quoted(text[i+1:], '\'')
			if !ok {
				return nil, fail(start, "bytes literal is not closed with '")
			}
			if len(s)%2 != 0 || strings.IndexFunc(s, func(r rune) bool { return !isHex(r) }) >= 0 {
				return nil, fail(start, "bytes literal X'%s' needs an even number of hexadecimal digits", s)
			}
			toks = append(toks, token{tokBytes, strings.ToLower(s), start + 1})
			i += 1 + n
		case r == '-' || r == '+' || r == '.' || (r >= '0' && r <= '9'):
			n := numberLen(text[i:])
			if n == 0 {
				return nil, fail(start, "unexpected %q", r)
			}
			toks = append(toks, token{tokNumber, text[i : i+n], start + 1})
			i += n
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if r2 != '_' && r2 != '.' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				j += s2
			}
			toks = append(toks, token{tokIdent, text[i:j], start + 1})
			i = j
		default:
			return nil, fail(start, "unexpected %q", r)
		}
	}
	return append(toks, token{tokEOF, "", len(text) + 1}), nil
}

// quoted reads a literal quoted with q, where a doubled q stands for one,
// from the start of s. It returns the content and the bytes consumed.
func quoted(s string, q byte) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

func isHex(r rune) bool {
	return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
}

// numberLen is the length of the number at the start of s: an optional
// sign, digits with an optional fraction, an optional exponent. It returns
// 0 when s does not start with one.
func numberLen(s string) int {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	return i
}

type parser struct {
	text string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return &PredicateError{Text: p.text, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

var keywords = []string{"AND", "OR", "IN", "BETWEEN", "IS", "NOT", "NULL", "TRUE", "FALSE"}

func (p *parser) cond() (Cond, error) {
	t := p.next()
	var c Cond
	switch {
	case t.kind == tokQuotedIdent:
		c = Cond{Column: t.text, Pos: t.pos}
	case t.kind == tokIdent && !isKeyword(t.text):
		if strings.HasPrefix(t.text, ".") || strings.HasSuffix(t.text, ".") || strings.Contains(t.text, "..") {
			return c, p.errAt(t.pos, "column name %q has an empty part", t.text)
		}
		c = Cond{Column: t.text, Pos: t.pos}
	default:
		return c, p.errAt(t.pos, "expected a column name, found %s", t.describe())
	}
	op := p.next()
	switch {
	case op.kind == tokOp:
		switch op.text {
		case "=":
			c.Op = OpEq
		case "<":
			c.Op = OpLt
		case "<=":
			c.Op = OpLe
		case ">":
			c.Op = OpGt
		case ">=":
			c.Op = OpGe
		default:
			return c, p.errAt(op.pos, "operator %s is not supported: use =, <, <=, >, >=, IN, BETWEEN or IS [NOT] NULL", op.text)
		}
		if nt := p.peek(); nt.isKeyword("NULL") {
			return c, p.errAt(nt.pos, "comparing with NULL matches nothing: use %s IS NULL", c.Column)
		}
		lit, err := p.literal()
		if err != nil {
			return c, err
		}
		c.Args = []Literal{lit}
	case op.isKeyword("IN"):
		c.Op = OpIn
		if lp := p.next(); lp.kind != tokLParen {
			return c, p.errAt(lp.pos, "expected ( after IN, found %s", lp.describe())
		}
		for {
			lit, err := p.literal()
			if err != nil {
				return c, err
			}
			c.Args = append(c.Args, lit)
			sep := p.next()
			if sep.kind == tokRParen {
				break
			}
			if sep.kind != tokComma {
				return c, p.errAt(sep.pos, "expected , or ) in the IN list, found %s", sep.describe())
			}
		}
	case op.isKeyword("BETWEEN"):
		c.Op = OpBetween
		lo, err := p.literal()
		if err != nil {
			return c, err
		}
		if and := p.next(); !and.isKeyword("AND") {
			return c, p.errAt(and.pos, "expected AND in BETWEEN, found %s", and.describe())
		}
		hi, err := p.literal()
		if err != nil {
			return c, err
		}
		c.Args = []Literal{lo, hi}
	case op.isKeyword("IS"):
		c.Op = OpIsNull
		nt := p.next()
		if nt.isKeyword("NOT") {
			c.Op = OpIsNotNull
			nt = p.next()
		}
		if !nt.isKeyword("NULL") {
			return c, p.errAt(nt.pos, "expected NULL after IS, found %s", nt.describe())
		}
	case op.isKeyword("NOT"):
		return c, p.errAt(op.pos, "NOT is supported only in IS NOT NULL")
	case op.isKeyword("LIKE"):
		return c, p.errAt(op.pos, "LIKE is not supported: use BETWEEN or >= and < for a prefix")
	default:
		return c, p.errAt(op.pos, "expected an operator (=, <, <=, >, >=, IN, BETWEEN, IS) after %s, found %s", c.Column, op.describe())
	}
	return c, nil
}

func (p *parser) literal() (Literal, error) {
	t := p.next()
	switch {
	case t.kind == tokString:
		return Literal{Kind: LitString, Text: t.text, Pos: t.pos}, nil
	case t.kind == tokNumber:
		return Literal{Kind: LitNumber, Text: t.text, Pos: t.pos}, nil
	case t.kind == tokBytes:
		return Literal{Kind: LitBytes, Text: t.text, Pos: t.pos}, nil
	case t.isKeyword("TRUE"), t.isKeyword("FALSE"):
		return Literal{Kind: LitBool, Text: strings.ToLower(t.text), Pos: t.pos}, nil
	case t.isKeyword("NULL"):
		return Literal{}, p.errAt(t.pos, "NULL is not a value to compare with: use IS NULL")
	case t.kind == tokIdent:
		return Literal{}, p.errAt(t.pos, "expected a literal, found %s (quote strings, dates and timestamps: '%s')", t.describe(), t.text)
	}
	return Literal{}, p.errAt(t.pos, "expected a literal, found %s", t.describe())
}

func isKeyword(s string) bool {
	for _, k := range keywords {
		if strings.EqualFold(s, k) {
			return true
		}
	}
	return false
}
