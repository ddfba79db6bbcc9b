package planner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// resolved is a predicate bound to an index: the values each index field
// may take, and the exact filters that decide which entries match.
type resolved struct {
	is     *format.IndexSchema
	derivs map[int]derivation // by index field ID, for fields that derive from one column
	// exact maps a source column to the stored index field that holds its
	// values unchanged: the identity field, or a materialized reference.
	exact map[int]int
	// src holds the admitted values of source columns named by conditions;
	// direct those of index fields named by conditions.
	src    map[int]valueSet
	direct map[int]valueSet
	// sets holds, for every index field that conditions constrain, the
	// values it may take: conditions on its source column projected
	// through its transforms, and conditions on the field itself.
	sets    map[int]valueSet
	filters []filter
	// none is set when some condition admits nothing: no entry matches.
	none bool
}

// filter is one exact test of an entry: the value of a stored field, or of
// an expression over stored fields, must be in set.
type filter struct {
	name    string
	fieldID int         // the stored field tested, when expr is nil
	expr    format.Expr // evaluated over the stored source columns otherwise
	typ     iceberg.Type
	set     valueSet
	// ints and strs test columns without boxing values, when set allows.
	ints *intSet
	strs stringPoints
	// ascStrs holds strs in ascending order, to binary-search a sorted
	// column.
	ascStrs []string
}

// resolve binds a predicate to an index schema. Column names are looked up
// in the given source schemas in order (the table snapshot's first, then
// the index snapshot's), then among the index's field names.
func resolve(pred *Predicate, is *format.IndexSchema, schemas ...*iceberg.Schema) (*resolved, error) {
	r := &resolved{
		is: is, derivs: map[int]derivation{}, exact: map[int]int{},
		src: map[int]valueSet{}, direct: map[int]valueSet{}, sets: map[int]valueSet{},
	}
	fieldType := func(id int) (iceberg.Type, bool) {
		if _, t, ok := format.MetadataColumn(id); ok {
			return t, true
		}
		for _, sc := range schemas {
			if f, ok := sc.FindFieldByID(id); ok {
				return f.Type, true
			}
		}
		return nil, false
	}
	for _, f := range is.Fields() {
		d, ok := derive(f, fieldType)
		if !ok {
			continue
		}
		r.derivs[f.ID] = d
		if f.Stored() && d.isIdentity() {
			// Identity fields come first in Fields, so they win.
			if _, taken := r.exact[d.source]; !taken {
				r.exact[d.source] = f.ID
			}
		}
	}
	for _, c := range pred.Conds {
		if err := r.addCond(pred.Text, c, schemas); err != nil {
			return nil, err
		}
	}
	r.project()
	return r, nil
}

func (r *resolved) addCond(text string, c Cond, schemas []*iceberg.Schema) error {
	fail := func(pos int, format string, args ...any) error {
		return &PredicateError{Text: text, Pos: pos, Msg: fmt.Sprintf(format, args...)}
	}
	sourceID, isSource := -1, false
	for _, sc := range schemas {
		if f, ok := sc.FindFieldByName(c.Column); ok {
			sourceID, isSource = f.ID, true
			break
		}
	}
	var field format.IndexField
	switch {
	case isSource:
		id, ok := r.exact[sourceID]
		if !ok {
			return fail(c.Pos, "the index does not store column %s, so it cannot filter on it exactly; it answers conditions on %s",
				c.Column, strings.Join(r.answerable(), ", "))
		}
		field, _ = r.is.Field(id)
	default:
		var ok bool
		if field, ok = r.fieldByName(c.Column); !ok {
			return fail(c.Pos, "unknown column %s; the index answers conditions on %s", c.Column, strings.Join(r.answerable(), ", "))
		}
		if !r.derivable(field) {
			return fail(c.Pos, "index field %s is not stored and not computable from stored columns; the index answers conditions on %s",
				c.Column, strings.Join(r.answerable(), ", "))
		}
	}
	vals := make([]any, len(c.Args))
	for i, lit := range c.Args {
		v, err := literalValue(field.Type, lit)
		if err != nil {
			return fail(lit.Pos, "column %s: %v", c.Column, err)
		}
		vals[i] = v
	}
	set := condSet(field.Type, c.Op, vals)
	target, key := r.direct, field.ID
	if isSource {
		target, key = r.src, sourceID
	}
	if cur, ok := target[key]; ok {
		set = cur.intersect(set)
	}
	target[key] = set
	return nil
}

func (r *resolved) fieldByName(name string) (format.IndexField, bool) {
	for _, f := range r.is.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return format.IndexField{}, false
}

// derivable reports whether a field's value can be known for a stored
// entry: it is stored, or every column it references is.
func (r *resolved) derivable(f format.IndexField) bool {
	if f.Stored() {
		return true
	}
	for _, id := range format.Refs(f.Expr) {
		if _, ok := r.exact[id]; !ok {
			return false
		}
	}
	return true
}

// answerable lists the names a condition may use, for error messages.
func (r *resolved) answerable() []string {
	var out []string
	for _, f := range r.is.Fields() {
		if r.derivable(f) && !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// project computes the admitted values of every index field and the exact
// filters.
func (r *resolved) project() {
	for _, s := range r.src {
		if s.isEmpty() {
			r.none = true
		}
	}
	for _, s := range r.direct {
		if s.isEmpty() {
			r.none = true
		}
	}
	for _, f := range r.is.Fields() {
		var set valueSet
		has := false
		if d, ok := r.derivs[f.ID]; ok {
			if s, ok := r.src[d.source]; ok {
				set, has = d.project(s), true
			}
		}
		if s, ok := r.direct[f.ID]; ok {
			if has {
				set = set.intersect(s)
			} else {
				set, has = s, true
			}
		}
		if has {
			r.sets[f.ID] = set
			if set.isEmpty() {
				r.none = true
			}
		}
	}
	// Exact filters: a source column's conditions test its stored field;
	// conditions on a field test the field, or its expression over the
	// stored columns when it is not stored.
	byField := map[int]int{}
	add := func(fl filter) {
		if i, ok := byField[fl.fieldID]; ok && fl.expr == nil {
			r.filters[i].set = r.filters[i].set.intersect(fl.set)
			return
		}
		if fl.expr == nil {
			byField[fl.fieldID] = len(r.filters)
		}
		r.filters = append(r.filters, fl)
	}
	for _, id := range sortedKeys(r.src) {
		f, _ := r.is.Field(r.exact[id])
		add(filter{name: f.Name, fieldID: f.ID, typ: f.Type, set: r.src[id]})
	}
	for _, id := range sortedKeys(r.direct) {
		f, _ := r.is.Field(id)
		fl := filter{name: f.Name, fieldID: f.ID, typ: f.Type, set: r.direct[id]}
		if !f.Stored() {
			fl.expr = f.Expr
		}
		add(fl)
	}
	for i := range r.filters {
		fl := &r.filters[i]
		fl.ints, _ = newIntSet(fl.set)
		fl.strs, _ = newStringPoints(fl.set)
		if fl.strs != nil {
			fl.ascStrs = slices.Sorted(maps.Keys(fl.strs))
		}
	}
}

func sortedKeys(m map[int]valueSet) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
