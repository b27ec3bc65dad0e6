package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// PrintExplain writes an explanation for people: the verdict first, then the
// evidence in the order of seed 004's triage (the quota's total against its
// ceiling per dimension, what raised it), then what the autoscaler may add, then
// the events. now ages the events and contributors.
func PrintExplain(w io.Writer, e PodExplanation, now time.Time) error {
	ew := &errWriter{w: w}
	head := &table{} // label/value pairs, no header
	if e.Pod != "" {
		head.add("Pod:", e.Pod)
	}
	head.add("Verdict:", e.Verdict)
	head.add("Requests:", pairs(e.Requests))
	if e.Node != "" {
		head.add("Node:", e.Node)
	}
	if e.NominatedNode != "" {
		head.add("Nominated:", e.NominatedNode)
	}
	_ = head.write(ew)

	if g := e.Gang; g != nil {
		printGang(ew, g)
	}
	if eq := e.ElasticQuota; eq != nil {
		printElastic(ew, eq, now)
	}
	if c := e.Capacity; c != nil {
		printCapacityExplanation(ew, c, now)
	}
	fmt.Fprintln(ew, "\nEVENTS (newest last)")
	if len(e.Events) == 0 {
		fmt.Fprintln(ew, "none from the scheduler or the autoscaler")
	} else {
		t := newTable("age", "type", "reason", "from", "count", "message")
		for _, ev := range e.Events {
			t.add(age(now, ev.Time), ev.Type, ev.Reason, ev.From, fmt.Sprint(ev.Count), ev.Message)
		}
		_ = t.write(ew)
	}
	_ = writeNotes(ew, e.Notes)
	return ew.err
}

func printElastic(w io.Writer, eq *ElasticQuotaExplanation, now time.Time) {
	fmt.Fprintf(w, "\nELASTIC QUOTA: tree %s, figures from %s\n", eq.Tree, eq.FiguresFrom)
	if eq.Leaf == "" {
		fmt.Fprintln(w, "no leaf lists the pod's namespace: it is neither limited nor counted")
		return
	}
	if eq.GangRequest {
		fmt.Fprintln(w, "REQUEST is the whole gang's: the tree admits all of it or none")
	}
	t := newTable("quota node", "resource", "used", "request", "min", "max", "borrowed", "binding")
	for _, n := range eq.Path {
		for _, r := range shownResources(n.Resources) {
			binding := ""
			if r.Binding {
				binding = "*"
			}
			t.add(n.Name, r.Resource, r.Used, r.Request, r.Min, r.Max, r.Borrowed, binding)
		}
	}
	_ = t.write(w)
	if eq.Admitted && eq.GangRequest {
		fmt.Fprintf(w, "The whole gang is admitted by %s and every ancestor.\n", eq.Leaf)
	} else if eq.Admitted {
		fmt.Fprintf(w, "Admitted by %s and every ancestor.\n", eq.Leaf)
	} else if eq.GangRequest {
		fmt.Fprintf(w, "Quota's message on the whole gang's request: %s\n", eq.Message)
	} else {
		fmt.Fprintf(w, "Scheduler message: %s\n", eq.Message)
	}
	if eq.ContributorsOf == "" {
		return
	}
	fmt.Fprintf(w, "\nWHAT RAISED %s: bound pods by workload, largest first\n", eq.ContributorsOf)
	t = newTable("namespace", "workload", "pods", "requests", "newest")
	for _, c := range eq.Contributors {
		t.add(c.Namespace, c.Workload, fmt.Sprint(c.Pods), pairs(c.Requests), age(now, c.Newest))
	}
	_ = t.write(w)
	if eq.MoreContributors > 0 {
		fmt.Fprintf(w, "... and %d more (--top)\n", eq.MoreContributors)
	}
}

// shownResources are the resources the pod requests, which are the only ones
// admission checks; all of them when it requests none the tree limits.
func shownResources(all []NodeResource) []NodeResource {
	var out []NodeResource
	for _, r := range all {
		if r.Binding || (r.Request != "" && r.Request != "0") {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

func printCapacityExplanation(w io.Writer, c *CapacityExplanation, now time.Time) {
	source := "from " + c.AutoscalerStatus
	if c.AutoscalerStatus == AutoscalerStatusNotFound {
		source = c.AutoscalerStatus
	}
	if c.StatusTime != nil {
		source += ", written " + age(now, *c.StatusTime) + " ago"
	}
	fmt.Fprintf(w, "\nNODE GROUPS: %s\n", source)
	if len(c.NodeGroups) == 0 {
		fmt.Fprintln(w, "none known")
	} else {
		t := newTable("name", "min", "max", "target", "registered", "upcoming", "template", "can host", "can grow", "why")
		for _, g := range c.NodeGroups {
			why := g.Why
			if g.CanHost {
				why = strings.Join(g.Blocked, "; ")
			}
			canGrow := yesNo(g.CanGrow)
			if !g.CanHost {
				canGrow = "-"
			}
			t.add(g.Name, fmt.Sprint(g.MinSize), fmt.Sprint(g.MaxSize), fmt.Sprint(g.Target), fmt.Sprint(g.Registered),
				fmt.Sprint(g.Upcoming), g.Template, yesNo(g.CanHost), canGrow, why)
		}
		_ = t.write(w)
	}
	if len(c.Quotas) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCAPACITY QUOTAS on the node groups able to host the pod")
	_ = capacityTable(c.Quotas, false).write(w)
}

func printGang(w io.Writer, g *GangExplanation) {
	fmt.Fprintf(w, "\nGANG: %s (%s)", g.Gang, g.Source)
	if g.Problem != "" {
		fmt.Fprintf(w, "\n%s\n", g.Problem)
		return
	}
	if g.MinCount > 0 {
		fmt.Fprintf(w, ", min count %d: %d pod(s), %d bound", g.MinCount, g.Pods, g.Bound)
	}
	fmt.Fprintln(w)
	switch {
	case g.Whole:
		fmt.Fprintf(w, "Whole: its first %d pods are bound; each further pod is judged alone.\n", g.MinCount)
	case g.Request != nil:
		fmt.Fprintf(w, "Asks its quota for %s", pairs(g.Request))
		if g.StandIns > 0 {
			fmt.Fprintf(w, " (%d pod(s) not created yet counted with this pod's requests)", g.StandIns)
		}
		fmt.Fprintln(w)
	}
	if c := g.Scheduled; c != nil {
		fmt.Fprintf(w, "%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(w, " (%s)", c.Reason)
		}
		if c.Message != "" {
			fmt.Fprintf(w, ": %s", c.Message)
		}
		fmt.Fprintln(w)
	}
	if len(g.Members) == 0 {
		return
	}
	t := newTable("pod", "node", "phase", "counted")
	for _, m := range g.Members {
		t.add(m.Pod, m.Node, string(m.Phase), yesNo(m.Counted))
	}
	_ = t.write(w)
}
