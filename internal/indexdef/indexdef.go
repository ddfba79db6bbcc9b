// Package indexdef reads the friendly index definition that people write
// (YAML or JSON, columns by name, expressions such as bucket(16, customer_id))
// and turns it into the spec's ID-based index metadata for one source table.
package indexdef

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/streamidx/streamidx/format"
)

// Definition is the friendly form of an index definition.
type Definition struct {
	// Name of the index, unique per table; letters, digits, _ and -.
	Name string `yaml:"name" json:"name"`
	// Identity lists source columns by name (dotted for nested fields).
	Identity []string `yaml:"identity" json:"identity"`
	// Materialized lists values stored in range files: column names,
	// metadata columns (_file, _pos) or expressions.
	Materialized []string `yaml:"materialized" json:"materialized"`
	// NonMaterialized lists expressions kept only as statistics.
	NonMaterialized []string `yaml:"non-materialized" json:"non-materialized"`
	// Cluster lists the clustering key: identity columns or expressions
	// declared above. An expression that appears only here is added as a
	// non-materialized field.
	Cluster []string `yaml:"cluster" json:"cluster"`
	// Properties become the index properties.
	Properties map[string]string `yaml:"properties" json:"properties"`
	// Source is where the index's changes come from: table (the table's
	// manifests) or events (the change events of the table's change topics,
	// staged as they arrive; the index must not store row locations). It is
	// kept as the index property PropSource. Default: table.
	Source string `yaml:"source" json:"source"`
}

// FirstExprFieldID is the ID given to the first expression field; the next
// ones follow. It is far above the IDs that tables assign to their columns
// (which count up from 1), so columns added to the table later do not
// collide with index fields, and it keeps 10000 + 200 * id below the spec's
// limit for every ID up to format.MaxIndexFieldID.
const FirstExprFieldID = 900_000

// PropName is the index property holding the index's name, for people
// reading a metadata file; the catalog is what maps names to indexes.
const PropName = "streamidx.name"

// PropSource is the index property that says where an index's changes come
// from: SourceEvents for an index fed by change events; absent (or
// SourceTable) for one fed by the table.
const PropSource = "streamidx.source"

// Values of PropSource.
const (
	SourceTable  = "table"
	SourceEvents = "events"
)

// EventsFed reports whether an index follows change events.
func EventsFed(md *format.Metadata) bool { return md.Properties[PropSource] == SourceEvents }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`)

// Parse reads a definition from YAML or JSON (JSON is YAML). Unknown keys are
// errors.
func Parse(data []byte) (*Definition, error) {
	var d Definition
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("parse index definition: %w", err)
	}
	if !nameRE.MatchString(d.Name) {
		return nil, fmt.Errorf("parse index definition: name %q: use letters, digits, _ and - (at most 128)", d.Name)
	}
	return &d, nil
}

// Resolve turns the definition into index metadata without snapshots for a
// table with the given schema, UUID and index location, and validates it
// with format.Validate.
func (d *Definition) Resolve(source *iceberg.Schema, tableUUID, location string) (*format.Metadata, error) {
	r := &resolver{source: source, exprIDs: map[string]int{}}
	m := &format.Metadata{
		FormatVersion: format.FormatVersion,
		IndexUUID:     uuid.NewString(),
		TableUUID:     tableUUID,
		Location:      location,
		Type:          format.TypeScalar,
		Properties:    map[string]string{PropName: d.Name},
	}
	maps.Copy(m.Properties, d.Properties)
	switch d.Source {
	case "", SourceTable:
	case SourceEvents:
		m.Properties[PropSource] = SourceEvents
	default:
		return nil, fmt.Errorf("index %s: source %q: want table or events", d.Name, d.Source)
	}
	for _, name := range d.Identity {
		id, err := r.column(name)
		if err != nil {
			return nil, fmt.Errorf("identity %q: %w", name, err)
		}
		m.IdentityFields = append(m.IdentityFields, id)
	}
	var err error
	if m.MaterializedFields, err = r.exprFields(d.Materialized, "materialized"); err != nil {
		return nil, err
	}
	if m.NonMaterializedFields, err = r.exprFields(d.NonMaterialized, "non-materialized"); err != nil {
		return nil, err
	}
	for _, c := range d.Cluster {
		e, err := ParseExpr(c, source)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c, err)
		}
		if ref, ok := e.(format.Ref); ok && containsInt(m.IdentityFields, ref.ID) {
			m.ClusterSpec = append(m.ClusterSpec, ref.ID)
			continue
		}
		key := exprKey(e)
		id, declared := r.exprIDs[key]
		if !declared {
			fields, err := r.exprFields([]string{c}, "cluster")
			if err != nil {
				return nil, err
			}
			m.NonMaterializedFields = append(m.NonMaterializedFields, fields...)
			id = fields[0].FieldID
		}
		m.ClusterSpec = append(m.ClusterSpec, id)
	}
	if err := format.Validate(m, source); err != nil {
		return nil, fmt.Errorf("index %s: %w", d.Name, err)
	}
	if EventsFed(m) {
		if err := checkEventsFed(m); err != nil {
			return nil, fmt.Errorf("index %s: %w", d.Name, err)
		}
	}
	return m, nil
}

// checkEventsFed refuses an events-fed index with a field no change event
// can give: a metadata column (a row location, a row lineage value).
func checkEventsFed(m *format.Metadata) error {
	for _, f := range append(append([]format.ExprField{}, m.MaterializedFields...), m.NonMaterializedFields...) {
		for _, id := range format.Refs(f.Expr) {
			if name, _, meta := format.MetadataColumn(id); meta {
				return fmt.Errorf("source: events cannot feed %s: a change event carries the row's values, not where the row "+
					"lives in the table (_file, _pos, _spec_id) nor its lineage (_row_id, _last_updated_sequence_number); "+
					"drop %s from the definition or use source: table", name, name)
			}
		}
	}
	return nil
}

type resolver struct {
	source  *iceberg.Schema
	exprIDs map[string]int // canonical expression JSON -> field ID
	next    int
}

func (r *resolver) column(name string) (int, error) {
	f, ok := r.source.FindFieldByName(name)
	if !ok {
		return 0, noColumn(name)
	}
	return f.ID, nil
}

// noColumn is the error for a name that is neither a column of the table
// nor a metadata column streamidx evaluates.
func noColumn(name string) error {
	if name == format.NamePartition {
		return fmt.Errorf("%s: the spec allows this metadata column in an index, but streamidx does not compute the partition struct it holds, "+
			"so it cannot build such an index (use the partition source columns, or their transforms, instead): %w", name, format.ErrUnsupportedExpression)
	}
	return fmt.Errorf("no column %q in the table", name)
}

func (r *resolver) exprFields(list []string, what string) ([]format.ExprField, error) {
	var out []format.ExprField
	for _, s := range list {
		e, err := ParseExpr(s, r.source)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, s, err)
		}
		key := exprKey(e)
		if _, dup := r.exprIDs[key]; dup {
			return nil, fmt.Errorf("%s %q: declared twice", what, s)
		}
		t, err := format.ResultType(e, r.fieldType)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, s, err)
		}
		id := FirstExprFieldID + r.next
		r.next++
		r.exprIDs[key] = id
		out = append(out, format.ExprField{FieldID: id, Type: format.ExprFieldType, DataType: t, Expr: e})
	}
	return out, nil
}

func (r *resolver) fieldType(id int) (iceberg.Type, bool) {
	if _, t, ok := format.MetadataColumn(id); ok {
		return t, true
	}
	f, ok := r.source.FindFieldByID(id)
	if !ok {
		return nil, false
	}
	return f.Type, true
}

func exprKey(e format.Expr) string {
	b, _ := format.MarshalExpr(e)
	return string(b)
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ParseExpr reads a friendly expression: a column name (dotted for nested
// fields, in double quotes or backticks when it has other characters), a
// metadata column (_file, _pos, _spec_id, _row_id,
// _last_updated_sequence_number) or a function call fn(args...) whose
// arguments are integers or expressions, such as bucket(16, customer_id) or
// day(ts).
func ParseExpr(s string, source *iceberg.Schema) (format.Expr, error) {
	p := &exprParser{src: s, source: source}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.src[p.pos:], p.pos)
	}
	return e, nil
}

type exprParser struct {
	src    string
	pos    int
	source *iceberg.Schema
}

func (p *exprParser) skipSpace() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *exprParser) expr() (format.Expr, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return nil, errors.New("expression expected")
	}
	if c := p.src[p.pos]; c == '-' || (c >= '0' && c <= '9') {
		start := p.pos
		p.pos++
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.Atoi(p.src[start:p.pos])
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", p.src[start:p.pos], err)
		}
		return format.IntLit(n), nil
	}
	name, quoted, err := p.name()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if !quoted && p.pos < len(p.src) && p.src[p.pos] == '(' {
		p.pos++
		var args []format.Expr
		for {
			p.skipSpace()
			if p.pos < len(p.src) && p.src[p.pos] == ')' && len(args) == 0 {
				p.pos++
				break
			}
			a, err := p.expr()
			if err != nil {
				return nil, fmt.Errorf("argument of %s: %w", name, err)
			}
			args = append(args, a)
			p.skipSpace()
			if p.pos >= len(p.src) {
				return nil, fmt.Errorf("%s( is not closed", name)
			}
			if p.src[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.src[p.pos] == ')' {
				p.pos++
				break
			}
			return nil, fmt.Errorf("unexpected %q in the arguments of %s", p.src[p.pos], name)
		}
		return format.NewApply(strings.ToLower(name), args...), nil
	}
	return p.ref(name)
}

func (p *exprParser) name() (string, bool, error) {
	if q := p.src[p.pos]; q == '"' || q == '`' {
		end := strings.IndexByte(p.src[p.pos+1:], q)
		if end < 0 {
			return "", false, fmt.Errorf("quoted name at offset %d is not closed", p.pos)
		}
		name := p.src[p.pos+1 : p.pos+1+end]
		p.pos += end + 2
		return name, true, nil
	}
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 {
			p.pos++
			continue
		}
		break
	}
	if start == p.pos {
		return "", false, fmt.Errorf("unexpected %q at offset %d", p.src[p.pos], p.pos)
	}
	return p.src[start:p.pos], false, nil
}

var metadataColumns = map[string]int{
	format.NameFile:                      format.FieldIDFile,
	format.NamePos:                       format.FieldIDPos,
	format.NameSpecID:                    format.FieldIDSpecID,
	format.NameRowID:                     format.FieldIDRowID,
	format.NameLastUpdatedSequenceNumber: format.FieldIDLastUpdatedSequenceNumber,
}

func (p *exprParser) ref(name string) (format.Expr, error) {
	if f, ok := p.source.FindFieldByName(name); ok {
		return format.Ref{ID: f.ID}, nil
	}
	if id, ok := metadataColumns[name]; ok {
		return format.Ref{ID: id}, nil
	}
	return nil, noColumn(name)
}
