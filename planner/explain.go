package planner

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/streamidx/streamidx/format"
)

// Plan is what a lookup decided, for `streamidx lookup --explain` and for
// people tuning an index: which snapshots it used, what each constrained
// field may hold, the key ranges, and why each range file was read or
// skipped.
type Plan struct {
	IndexUUID        string `json:"index_uuid"`
	IndexSnapshotID  int64  `json:"index_snapshot_id"`
	SourceSnapshotID int64  `json:"source_snapshot_id"` // the table snapshot the index snapshot is for
	TableSnapshotID  int64  `json:"table_snapshot_id"`  // the table snapshot answered for
	// TableScan, when set, says why the lookup scanned the table instead of
	// reading the index: the index type is not implemented. Then no index
	// snapshot was used and AddedDataFiles are every data file read.
	TableScan     string `json:"table_scan,omitempty"`
	CommitsBehind int    `json:"commits_behind"` // table commits between the two
	Predicate     string `json:"predicate"`
	// Fields are the index fields that the predicate constrains, with the
	// values each may hold (conditions projected through transforms).
	Fields []FieldPlan `json:"fields"`
	// KeyRanges is how many clustering-key ranges the lookup searched the
	// tracking file for; KeyRangeSample shows the first few.
	KeyRanges      int      `json:"key_ranges"`
	KeyRangeSample []string `json:"key_range_sample"`
	// KeyPruningOff says why the tracking file could not be searched, when
	// it could not.
	KeyPruningOff string `json:"key_pruning_off,omitempty"`
	// RangeFiles are the range files read.
	RangeFiles []FilePlan `json:"range_files"`
	// PrunedByKey counts range files outside every key range;
	// PrunedByStats those whose statistics of a field (by name) exclude
	// every match.
	PrunedByKey   int            `json:"pruned_by_key"`
	PrunedByStats map[string]int `json:"pruned_by_stats,omitempty"`
	// RemovedDataFiles and AddedDataFiles are the data files removed and
	// added between the index snapshot's table snapshot and the one
	// answered for.
	RemovedDataFiles int      `json:"removed_data_files"`
	AddedDataFiles   []string `json:"added_data_files,omitempty"`
}

// FieldPlan is one index field that the predicate constrains.
type FieldPlan struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	// Derivation is how the field is computed from a source column, such
	// as bucket[8](customer_id); empty when it is not derived from one.
	Derivation string `json:"derivation,omitempty"`
	// ClusterPosition is the field's 1-based position in the clustering
	// key; 0 when it is not a cluster field.
	ClusterPosition int    `json:"cluster_position,omitempty"`
	Values          string `json:"values"`
}

// FilePlan is one range file read.
type FilePlan struct {
	Path    string `json:"path"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	// KeyRange is the first key range that reaches the file.
	KeyRange      string `json:"key_range"`
	RowGroups     int    `json:"row_groups"`
	RowGroupsRead int    `json:"row_groups_read"`
}

func fieldPlans(r *resolved) []FieldPlan {
	var out []FieldPlan
	cluster := r.is.ClusterFields()
	for _, f := range r.is.Fields() {
		set, ok := r.sets[f.ID]
		if !ok {
			continue
		}
		fp := FieldPlan{ID: f.ID, Name: f.Name, Values: set.String()}
		if d, ok := r.derivs[f.ID]; ok && !d.isIdentity() {
			name := fmt.Sprintf("field %d", d.source)
			for _, g := range r.is.Fields() {
				if g.ID == r.exact[d.source] {
					name = g.Name
				}
			}
			fp.Derivation = d.describe(name)
		}
		fp.ClusterPosition = slices.IndexFunc(cluster, func(c format.IndexField) bool { return c.ID == f.ID }) + 1
		out = append(out, fp)
	}
	// Cluster fields first, in cluster order.
	slices.SortStableFunc(out, func(a, b FieldPlan) int {
		pa, pb := a.ClusterPosition, b.ClusterPosition
		if pa == 0 {
			pa = len(cluster) + 1
		}
		if pb == 0 {
			pb = len(cluster) + 1
		}
		return pa - pb
	})
	return out
}

// WriteExplain writes the plan and the counters of a lookup for people.
func (r *Result) WriteExplain(w io.Writer) error {
	p, st := &r.Plan, &r.Stats
	var b strings.Builder
	if p.TableScan != "" {
		fmt.Fprintf(&b, "table scan of table snapshot %d: %s\npredicate: %s\n", p.TableSnapshotID, p.TableScan, orDash(p.Predicate))
		fmt.Fprintf(&b, "counters: data files scanned %d (%d rows); rows %d", st.DataFilesScanned, st.DataRowsScanned, st.Rows)
		if r.Truncated {
			b.WriteString(" (limit reached)")
		}
		b.WriteString("\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "index snapshot %d (table snapshot %d)", p.IndexSnapshotID, p.SourceSnapshotID)
	if p.CommitsBehind == 0 {
		fmt.Fprintf(&b, ", exact for table snapshot %d\n", p.TableSnapshotID)
	} else {
		fmt.Fprintf(&b, ", %d commits behind table snapshot %d: reconciled (%d data files removed, %d added)\n",
			p.CommitsBehind, p.TableSnapshotID, p.RemovedDataFiles, len(p.AddedDataFiles))
	}
	pred := p.Predicate
	if pred == "" {
		pred = "(none: every entry)"
	}
	fmt.Fprintf(&b, "predicate: %s\n", pred)
	if len(p.Fields) > 0 {
		b.WriteString("field values:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FIELD\tCLUSTER\tFROM\tVALUES")
		for _, f := range p.Fields {
			cl := "-"
			if f.ClusterPosition > 0 {
				cl = fmt.Sprint(f.ClusterPosition)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, cl, orDash(f.Derivation), truncate(f.Values, 120))
		}
		tw.Flush()
	}
	if p.KeyPruningOff != "" {
		fmt.Fprintf(&b, "key ranges: none searched: %s\n", p.KeyPruningOff)
	} else {
		fmt.Fprintf(&b, "key ranges: %d\n", p.KeyRanges)
		for _, s := range p.KeyRangeSample {
			fmt.Fprintf(&b, "  %s\n", s)
		}
		if p.KeyRanges > len(p.KeyRangeSample) {
			fmt.Fprintf(&b, "  ... %d more\n", p.KeyRanges-len(p.KeyRangeSample))
		}
	}
	fmt.Fprintf(&b, "range files: %d of %d read; %d outside the key ranges", st.RangeFilesRead, st.RangeFilesTotal, p.PrunedByKey)
	names := make([]string, 0, len(p.PrunedByStats))
	for n := range p.PrunedByStats {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, ", %d by bounds of %s", p.PrunedByStats[n], n)
	}
	b.WriteString("\n")
	if len(p.RangeFiles) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FILE\tRECORDS\tROW GROUPS READ\tREACHED BY")
		for _, f := range p.RangeFiles[:min(len(p.RangeFiles), maxExplainFiles)] {
			fmt.Fprintf(tw, "  %s\t%d\t%d/%d\t%s\n", f.Path, f.Records, f.RowGroupsRead, f.RowGroups, f.KeyRange)
		}
		tw.Flush()
		if len(p.RangeFiles) > maxExplainFiles {
			fmt.Fprintf(&b, "  ... %d more\n", len(p.RangeFiles)-maxExplainFiles)
		}
	}
	fmt.Fprintf(&b, "counters: range files %d/%d, row groups %d/%d, pages %d/%d, bytes read %d (tracking file %d), entries scanned %d, matched %d",
		st.RangeFilesRead, st.RangeFilesTotal, st.RowGroupsRead, st.RowGroupsTotal, st.PagesRead, st.PagesTotal, st.BytesRead, st.TrackingBytesRead,
		st.EntriesScanned, st.EntriesMatched)
	if p.CommitsBehind > 0 {
		fmt.Fprintf(&b, ", dropped %d; data files scanned %d (%d rows), rows added %d",
			st.EntriesDropped, st.DataFilesScanned, st.DataRowsScanned, st.RowsAdded)
	}
	fmt.Fprintf(&b, "; rows %d", st.Rows)
	if r.Truncated {
		b.WriteString(" (limit reached)")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const maxExplainFiles = 20

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + " ..."
}
