package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
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
// trips unchanged; DataType is the literal's "data-type" when the file gives
// one (it implies the wrapped form), nil otherwise.
type Lit struct {
	Value    any
	Wrapped  bool
	DataType iceberg.Type
}

// Apply applies a function to arguments, such as bucket(16, ref(1)).
type Apply struct {
	Function Function
	Args     []Expr
}

// Function is a function reference: an optional catalog and an identifier
// of namespace parts followed by the function name. Every JSON form of the
// expressions spec reads into it: a bare name, a list of names, and an
// object with an identifier and an optional (or null) catalog.
type Function struct {
	// Name is the function name: the last part of Identifier.
	Name string
	// Catalog is the catalog named by the reference; "" when it names none.
	Catalog string
	// Identifier holds the namespace parts, then the name; never empty.
	Identifier []string
}

// BuiltinFunction returns a reference to a function of the iceberg_functions
// catalog.
func BuiltinFunction(name string) Function {
	return Function{Name: name, Catalog: IcebergFunctionsCatalog, Identifier: []string{name}}
}

// IsBuiltin reports whether the reference names a function of the
// iceberg_functions catalog. A reference without a catalog means the
// catalog the index is stored in; an index catalog defines no functions of
// its own, so a one-part name there is read as the built-in of that name,
// as writers that use the short forms mean it.
func (f Function) IsBuiltin() bool {
	return (f.Catalog == "" || f.Catalog == IcebergFunctionsCatalog) && len(f.Identifier) == 1
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

// NewApply builds an application of a function of the iceberg_functions
// catalog.
func NewApply(name string, args ...Expr) Apply {
	return Apply{Function: BuiltinFunction(name), Args: args}
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

// MaxExprDepth is how deeply function applications may nest in an index
// expression: bucket(16, truncate(4, ref)) nests 2 deep. ParseExpr refuses
// deeper expressions before building them, and Validate refuses them
// before they are written, so nothing is written that readers reject.
const MaxExprDepth = 64

// ExprDepth returns how deeply function applications nest in e: 0 for a
// reference or a literal.
func ExprDepth(e Expr) int {
	a, ok := e.(Apply)
	if !ok {
		return 0
	}
	deepest := 0
	for _, arg := range a.Args {
		deepest = max(deepest, ExprDepth(arg))
	}
	return deepest + 1
}

func exprFromJSON(v any, depth int) (Expr, error) {
	if depth > MaxExprDepth {
		return nil, fmt.Errorf("parse expression: function applications nest more than %d deep", MaxExprDepth)
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
		lit := Lit{Value: val, Wrapped: true}
		if raw, ok := obj["data-type"]; ok && raw != nil {
			data, err := json.Marshal(raw)
			if err != nil {
				return nil, fmt.Errorf("parse expression: literal data-type: %w", err)
			}
			if lit.DataType, err = ParseType(data); err != nil {
				return nil, fmt.Errorf("parse expression: literal %w", err)
			}
		}
		return lit, nil
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

// functionFromJSON reads every FUNC_REF form of the expressions spec's
// Appendix B: NAME, [NAME*], {"identifier": [NAME*]} and
// {"catalog": NAME, "identifier": [NAME*]}, the catalog being optional or
// null.
func functionFromJSON(v any) (Function, error) {
	var parts []any
	var f Function
	switch x := v.(type) {
	case string:
		parts = []any{x}
	case []any:
		parts = x
	case map[string]any:
		switch c := x["catalog"].(type) {
		case nil:
		case string:
			if c == "" {
				return Function{}, errors.New("parse expression: function catalog is an empty string")
			}
			f.Catalog = c
		default:
			return Function{}, errors.New("parse expression: function catalog must be a string")
		}
		var ok bool
		if parts, ok = x["identifier"].([]any); !ok {
			return Function{}, errors.New("parse expression: function needs a non-empty identifier")
		}
	default:
		return Function{}, errors.New("parse expression: apply needs a function")
	}
	if len(parts) == 0 {
		return Function{}, errors.New("parse expression: function needs a non-empty identifier")
	}
	for _, p := range parts {
		s, ok := p.(string)
		if !ok || s == "" {
			return Function{}, errors.New("parse expression: function identifier parts must be non-empty strings")
		}
		f.Identifier = append(f.Identifier, s)
	}
	f.Name = f.Identifier[len(f.Identifier)-1]
	return f, nil
}

// MarshalExpr writes the JSON serialization of a value expression.
func MarshalExpr(e Expr) (json.RawMessage, error) {
	v, err := exprToJSON(e)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// exprToJSON builds the JSON of e with its keys in the spec's order, so
// written files are stable and read as the spec shows them.
func exprToJSON(e Expr) (any, error) {
	switch e := e.(type) {
	case Ref:
		return jsonObject{{"type", "reference"}, {"id", e.ID}}, nil
	case Lit:
		if e.DataType != nil {
			dt, err := MarshalType(e.DataType)
			if err != nil {
				return nil, err
			}
			return jsonObject{{"type", "literal"}, {"value", e.Value}, {"data-type", dt}}, nil
		}
		if e.Wrapped {
			return jsonObject{{"type", "literal"}, {"value", e.Value}}, nil
		}
		return e.Value, nil
	case Apply:
		// The canonical form names the catalog: an iceberg_functions
		// function is unambiguous wherever the metadata is read.
		f := e.Function
		if len(f.Identifier) == 0 {
			f.Identifier = []string{f.Name}
		}
		if f.Catalog == "" && f.IsBuiltin() {
			f.Catalog = IcebergFunctionsCatalog
		}
		fn := jsonObject{{"identifier", f.Identifier}}
		if f.Catalog != "" {
			fn = append(jsonObject{{"catalog", f.Catalog}}, fn...)
		}
		args := make([]any, len(e.Args))
		for i, a := range e.Args {
			v, err := exprToJSON(a)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return jsonObject{{"type", "apply"}, {"function", fn}, {"arguments", args}}, nil
	case nil:
		return nil, errors.New("write expression: nil expression")
	}
	return nil, fmt.Errorf("write expression: unknown expression %T", e)
}

// jsonObject is a JSON object whose keys are written in order.
type jsonObject []struct {
	key   string
	value any
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		v, err := json.Marshal(kv.value)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
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
