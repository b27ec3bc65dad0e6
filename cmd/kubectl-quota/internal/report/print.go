package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// newTabWriter has kubectl's column settings, so the tables read like kubectl's.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}

// table collects rows and writes them aligned, headers upper-cased.
type table struct {
	rows [][]string
}

func newTable(headers ...string) *table {
	upper := make([]string, len(headers))
	for i, h := range headers {
		upper[i] = strings.ToUpper(h)
	}
	return &table{rows: [][]string{upper}}
}

func (t *table) add(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		// A tab or newline in a user's string would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i])
	}
	t.rows = append(t.rows, cells)
}

func (t *table) write(w io.Writer) error {
	tw := newTabWriter(w)
	for _, row := range t.rows {
		if _, err := fmt.Fprintln(tw, strings.Join(row, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// age is kubectl's human duration since t, "<unknown>" for the zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// pairs is "k=v,k=v" sorted by key.
func pairs(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func writeNotes(w io.Writer, notes []string) error {
	if len(notes) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nNOTES"); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, "- "+n); err != nil {
			return err
		}
	}
	return nil
}

// errWriter keeps the first write error so printers read straight.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// PrintCapacity writes `kubectl quota capacity` as a table: one row per quota
// and limited resource, quotas by name, resources sorted.
func PrintCapacity(w io.Writer, r CapacityReport) error {
	ew := &errWriter{w: w}
	if len(r.Quotas) == 0 {
		fmt.Fprintln(ew, "No CapacityQuotas found.")
	} else {
		t := capacityTable(r.Quotas, true)
		_ = t.write(ew)
	}
	_ = writeNotes(ew, r.Notes)
	return ew.err
}

func capacityTable(quotas []CapacityQuotaView, withMessage bool) *table {
	headers := []string{"name", "resource", "used", "upcoming", "limit", "headroom", "node groups", "valid"}
	if withMessage {
		headers = append(headers, "message")
	}
	t := newTable(headers...)
	for _, q := range quotas {
		valid := "False"
		if q.Valid {
			valid = "True"
		}
		resources := q.Resources
		if len(resources) == 0 {
			resources = []QuotaResource{{}}
		}
		for _, res := range resources {
			upcoming := res.Upcoming
			if upcoming == "" && res.Resource != "" {
				upcoming = "?"
			}
			used := res.Used
			if q.UsedFrom == FromStatus && used != "" {
				used += " (status)"
			}
			row := []string{q.Name, res.Resource, used, upcoming, res.Limit, res.Headroom, strings.Join(q.NodeGroups, ","), valid}
			if withMessage {
				row = append(row, q.Message)
			}
			t.add(row...)
		}
	}
	return t
}

// PrintTree writes each tree as a header and an indented table of its quota
// nodes: USED/MIN/MAX per resource, then what each node borrows.
func PrintTree(w io.Writer, r TreeReport) error {
	ew := &errWriter{w: w}
	if len(r.Trees) == 0 {
		fmt.Fprintln(ew, "No ElasticQuotaTrees found.")
	}
	for i, tv := range r.Trees {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		state := "not in force"
		if tv.InForce {
			state = "in force"
			if tv.FiguresFrom != "" {
				state += ", figures from " + tv.FiguresFrom
			}
		}
		fmt.Fprintf(ew, "TREE: %s (%s, generation %d)\n", tv.Tree, state, tv.Generation)
		fmt.Fprintf(ew, "CONDITIONS: %s\n", conditionSummary(tv.Conditions))
		headers := []string{"name", "namespaces"}
		for _, res := range tv.Resources {
			headers = append(headers, res+" used/min/max")
		}
		headers = append(headers, "borrowed")
		t := newTable(headers...)
		for _, n := range tv.Nodes {
			row := []string{strings.Repeat("  ", max(0, n.Depth-1)) + n.Name, strings.Join(n.Namespaces, ",")}
			var borrowed []string
			for _, res := range n.Resources {
				used := res.Used
				if used == "" {
					used = "-"
				}
				row = append(row, used+"/"+res.Min+"/"+res.Max)
				if res.Borrowed != "" && res.Borrowed != "0" {
					borrowed = append(borrowed, res.Resource+"="+res.Borrowed)
				}
			}
			row = append(row, strings.Join(borrowed, ","))
			t.add(row...)
		}
		_ = t.write(ew)
		_ = writeNotes(ew, tv.Notes)
	}
	_ = writeNotes(ew, r.Notes)
	return ew.err
}
