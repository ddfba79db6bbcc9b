package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// ExplainLine is the last line of a JSON-lines answer with explain: the
// plan and what was read.
type ExplainLine struct {
	Explain struct {
		Plan      Plan  `json:"plan"`
		Stats     Stats `json:"stats"`
		Truncated bool  `json:"truncated"`
	} `json:"explain"`
}

// WriteJSONLines writes the result as `streamidx lookup --json` prints it
// and the lookup service answers: one JSON object per row, keys in the
// index's stored field order, then, with explain, one ExplainLine.
func (r *Result) WriteJSONLines(w io.Writer, explain bool) error {
	var line bytes.Buffer
	for _, b := range r.Batches {
		for i := range int(b.NumRows()) {
			line.Reset()
			line.WriteByte('{')
			for c, f := range r.Fields {
				if c > 0 {
					line.WriteByte(',')
				}
				k, _ := json.Marshal(f.Name)
				v, err := json.Marshal(JSONValue(f.Type, format.ValueAtAs(f.Type, b.Column(c), i)))
				if err != nil {
					return fmt.Errorf("write row: field %s: %w", f.Name, err)
				}
				line.Write(k)
				line.WriteByte(':')
				line.Write(v)
			}
			line.WriteString("}\n")
			if _, err := w.Write(line.Bytes()); err != nil {
				return err
			}
		}
	}
	if !explain {
		return nil
	}
	var x ExplainLine
	x.Explain.Plan, x.Explain.Stats, x.Explain.Truncated = r.Plan, r.Stats, r.Truncated
	return json.NewEncoder(w).Encode(x)
}

// JSONValue is a value as the JSON answers show it: booleans and integers
// natively, floats as numbers except NaN and the infinities ("NaN",
// "Infinity", "-Infinity"), everything else as the string FormatValue
// renders (decimals with their scale, ISO 8601 dates and times, hex bytes).
func JSONValue(t iceberg.Type, v any) any {
	if v == nil {
		return nil
	}
	switch x := v.(type) {
	case bool:
		return x
	case float32:
		return jsonFloat(float64(x))
	case float64:
		return jsonFloat(x)
	}
	switch t.(type) {
	case iceberg.Int32Type, iceberg.Int64Type:
		return v
	}
	return format.FormatValue(t, v)
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// WriteTable writes the rows as an aligned table for people (what
// `streamidx lookup` prints without --json), then the plan when explain.
func (res *Result) WriteTable(w io.Writer, explain bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	names := make([]string, len(res.Fields))
	for i, f := range res.Fields {
		names[i] = strings.ToUpper(f.Name)
	}
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	vals := make([]string, len(res.Fields))
	for _, b := range res.Batches {
		for i := range int(b.NumRows()) {
			for c, f := range res.Fields {
				vals[c] = format.FormatValue(f.Type, format.ValueAtAs(f.Type, b.Column(c), i))
			}
			fmt.Fprintln(tw, strings.Join(vals, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	note := ""
	if res.Truncated {
		note = "; limit reached"
	}
	if n := res.NumRows(); n == 1 {
		fmt.Fprintf(w, "(1 row%s)\n", note)
	} else {
		fmt.Fprintf(w, "(%d rows%s)\n", n, note)
	}
	if !explain {
		return nil
	}
	fmt.Fprintln(w)
	return res.WriteExplain(w)
}
