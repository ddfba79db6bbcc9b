package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Expr is an Iceberg value expression: a reference to a source field by ID,
// a literal, or a function applied to arguments.
type Expr interface {
	isExpr()
	String() string
}

// Ref refers to a source table field or a metadata column by field ID.
type Ref struct {
	ID int
}

// Lit is a literal. Value holds the decoded JSON value: json.Number, string,
// bool or nil. Wrapped records whether it was written as
// {"type":"literal","value":V} rather than as the bare value, so a file round
// trips unchanged.
type Lit struct {
	Value   any
	Wrapped bool
}

// Apply applies a function to arguments, such as bucket(16, ref(1)).
type Apply struct {
	Function Function
	Args     []Expr
}

// Function names a function. Qualified records the {catalog, identifier}
// form; the bare string form has only Name.
type Function struct {
	Name       string
	Catalog    string
	Identifier []string
	Qualified  bool
}

// IcebergFunctionsCatalog is the catalog name of the built-in functions.
const IcebergFunctionsCatalog = "iceberg_functions"

func (Ref) isExpr()   {}
func (Lit) isExpr()   {}
func (Apply) isExpr() {}

func (r Ref) String() string { return fmt.Sprintf("ref(%d)", r.ID) }

func (l Lit) String() string {
	if s, ok := l.Value.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(l.Value)
}

func (a Apply) String() string {
	var b bytes.Buffer
	b.WriteString(a.Function.Name)
	b.WriteByte('(')
	for i, arg := range a.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(arg.String())
	}
	b.WriteByte(')')
	return b.String()
}

// NewApply builds an application of a built-in function, written in the
// short string form.
func NewApply(name string, args ...Expr) Apply {
	return Apply{Function: Function{Name: name}, Args: args}
}

// IntLit is a literal integer argument, such as the N of bucket[N].
func IntLit(v int) Lit { return Lit{Value: json.Number(strconv.Itoa(v))} }

// Int returns the literal as an int, for transform parameters.
func (l Lit) Int() (int, error) {
	n, ok := l.Value.(json.Number)
	if !ok {
		return 0, fmt.Errorf("literal %s is not a number", l)
	}
	v, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("literal %s is not a 32-bit integer", l)
	}
	return int(v), nil
}

// Refs returns the field IDs an expression references, in first-use order.
func Refs(e Expr) []int {
	var ids []int
	var walk func(Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case Ref:
			if !slices.Contains(ids, e.ID) {
				ids = append(ids, e.ID)
			}
		case Apply:
			for _, a := range e.Args {
				walk(a)
			}
		}
	}
	walk(e)
	return ids
}

// ErrNamedReference is returned when an expression refers to a field by name:
// index expressions must use field IDs.
var ErrNamedReference = errors.New("named references must not be used in index expressions")

// ParseExpr reads the JSON serialization of a value expression.
func ParseExpr(data []byte) (Expr, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse expression: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse expression: trailing data")
	}
	return exprFromJSON(v, 0)
}

const maxExprDepth = 64

func exprFromJSON(v any, depth int) (Expr, error) {
	if depth > maxExprDepth {
		return nil, errors.New("parse expression: nested too deeply")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		switch v.(type) {
		case []any:
			return nil, errors.New("parse expression: a list is not a value expression")
		}
		return Lit{Value: v}, nil
	}
	typ, _ := obj["type"].(string)
	switch typ {
	case "reference":
		if _, named := obj["term"]; named {
			return nil, ErrNamedReference
		}
		if _, named := obj["name"]; named {
			return nil, ErrNamedReference
		}
		n, ok := obj["id"].(json.Number)
		if !ok {
			return nil, errors.New("parse expression: reference needs an integer id")
		}
		id, err := strconv.ParseInt(string(n), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse expression: reference id %s: not a 32-bit integer", n)
		}
		return Ref{ID: int(id)}, nil
	case "literal":
		val, ok := obj["value"]
		if !ok {
			return nil, errors.New("parse expression: literal needs a value")
		}
		if _, nested := val.(map[string]any); nested {
			return nil, errors.New("parse expression: literal value must be a JSON scalar")
		}
		if _, nested := val.([]any); nested {
			return nil, errors.New("parse expression: literal value must be a JSON scalar")
		}
		return Lit{Value: val, Wrapped: true}, nil
	case "apply":
		fn, err := functionFromJSON(obj["function"])
		if err != nil {
			return nil, err
		}
		rawArgs, ok := obj["arguments"].([]any)
		if !ok {
			return nil, fmt.Errorf("parse expression: %s needs a list of arguments", fn.Name)
		}
		args := make([]Expr, 0, len(rawArgs))
		for _, ra := range rawArgs {
			a, err := exprFromJSON(ra, depth+1)
			if err != nil {
				return nil, err
			}
			args = append(args, a)
		}
		return Apply{Function: fn, Args: args}, nil
	case "":
		return nil, errors.New("parse expression: object without a type")
	default:
		return nil, fmt.Errorf("parse expression: unknown expression type %q", typ)
	}
}

func functionFromJSON(v any) (Function, error) {
	switch f := v.(type) {
	case string:
		if f == "" {
			return Function{}, errors.New("parse expression: empty function name")
		}
		return Function{Name: f}, nil
	case map[string]any:
		cat, _ := f["catalog"].(string)
		rawID, ok := f["identifier"].([]any)
		if !ok || len(rawID) == 0 {
			return Function{}, errors.New("parse expression: function needs a non-empty identifier")
		}
		ident := make([]string, len(rawID))
		for i, p := range rawID {
			s, ok := p.(string)
			if !ok || s == "" {
				return Function{}, errors.New("parse expression: function identifier parts must be non-empty strings")
			}
			ident[i] = s
		}
		return Function{Name: ident[len(ident)-1], Catalog: cat, Identifier: ident, Qualified: true}, nil
	default:
		return Function{}, errors.New("parse expression: apply needs a function")
	}
}

// MarshalExpr writes the JSON serialization of a value expression.
func MarshalExpr(e Expr) (json.RawMessage, error) {
	v, err := exprToJSON(e)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func exprToJSON(e Expr) (any, error) {
	switch e := e.(type) {
	case Ref:
		return map[string]any{"type": "reference", "id": e.ID}, nil
	case Lit:
		if e.Wrapped {
			return map[string]any{"type": "literal", "value": e.Value}, nil
		}
		return e.Value, nil
	case Apply:
		var fn any = e.Function.Name
		if e.Function.Qualified {
			fn = map[string]any{"catalog": e.Function.Catalog, "identifier": e.Function.Identifier}
		}
		args := make([]any, len(e.Args))
		for i, a := range e.Args {
			v, err := exprToJSON(a)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return map[string]any{"type": "apply", "function": fn, "arguments": args}, nil
	case nil:
		return nil, errors.New("write expression: nil expression")
	}
	return nil, fmt.Errorf("write expression: unknown expression %T", e)
}

// Describe renders an expression for people, naming references with name
// (which returns "" for an unknown ID, rendered as ref(id)): bucket(16,
// customer_id) rather than bucket(16, ref(2)).
func Describe(e Expr, name func(id int) string) string {
	switch e := e.(type) {
	case Ref:
		if n := name(e.ID); n != "" {
			return n
		}
	case Apply:
		parts := make([]string, len(e.Args))
		for i, a := range e.Args {
			parts[i] = Describe(a, name)
		}
		return e.Function.Name + "(" + strings.Join(parts, ", ") + ")"
	}
	return e.String()
}
