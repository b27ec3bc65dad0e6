package report

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// DefaultTop is how many contributors explain lists by default.
const DefaultTop = 5

// AutoscalerStatusNotFound is CapacityExplanation.AutoscalerStatus when no
// status ConfigMap was read.
const AutoscalerStatusNotFound = "autoscaler status not found"

// Explain answers why pod is where it is: its tree's verdict on the leaf and
// every ancestor, what raised the binding node's total, which node groups could
// host it and what stops them growing, and its recent events. top bounds the
// contributors listed.
func Explain(s Snapshot, pod *corev1.Pod, top int) PodExplanation {
	requests := resources.PodRequests(pod)
	lookup := s.claimLookup()
	out := PodExplanation{
		Kind:          "PodExplanation",
		APIVersion:    APIVersion,
		Pod:           pod.Namespace + "/" + pod.Name,
		Phase:         pod.Status.Phase,
		Node:          pod.Spec.NodeName,
		NominatedNode: pod.Status.NominatedNodeName,
		Requests:      map[string]string{},
		Notes:         slices.Clone(s.Notes),
	}
	for _, name := range sortedNames(requests) {
		q := requests[name]
		out.Requests[string(name)] = q.String()
	}
	tree := elastic.InForce(s.Trees)
	var m *model
	var modelErr error
	if tree != nil {
		m, modelErr = newModel(tree, s.Pods, lookup, s.Now)
	}
	var gangRequest corev1.ResourceList
	out.Gang, gangRequest = explainGang(s, pod, gangCharger(lookup, m))
	if tree != nil {
		if modelErr != nil {
			out.Notes = append(out.Notes, modelErr.Error())
		} else {
			// The tree also charges the pod's devices; a shared claim that a
			// bound pod uses is charged already.
			charge, claimNotes := podCharge(pod, lookup, m.live)
			out.Notes = append(out.Notes, claimNotes...)
			judged, ofGang := gangRequests(pod, charge, gangRequest)
			out.ElasticQuota = explainElastic(m, pod, judged, s.Pods, top)
			out.ElasticQuota.GangRequest = ofGang
			out.Notes = append(out.Notes, m.notes...)
		}
	} else {
		out.Notes = append(out.Notes, "no ElasticQuotaTree in kube-system: the pod is not limited by elastic quota")
	}
	if pod.Spec.NodeName == "" {
		capx, notes := explainCapacity(s, pod, requests)
		out.Capacity = capx
		out.Notes = append(out.Notes, notes...)
	}
	out.Events = podEvents(pod, s.Events)
	out.Verdict = verdict(pod, out.Gang, out.ElasticQuota, out.Capacity, out.Events)
	return out
}

// explainElastic judges a pending pod with the library's Admit against the
// figures of the tree in force. A bound pod is already charged, so it is shown
// but not judged again.
func explainElastic(m *model, pod *corev1.Pod, requests corev1.ResourceList, pods []*corev1.Pod, top int) *ElasticQuotaExplanation {
	out := &ElasticQuotaExplanation{Tree: m.object, FiguresFrom: m.source, Admitted: true}
	leaf, governed := m.tree.LeafFor(pod.Namespace)
	if !governed {
		return out
	}
	out.Leaf = leaf.Name()
	var v elastic.Verdict
	if !elastic.Charged(pod) {
		v = m.tree.Admit(pod.Namespace, requests)
		out.Admitted, out.Message = v.Admitted(), v.Message()
	}
	binding := map[string]bool{}
	for _, e := range v.Excesses {
		for _, r := range e.Resources {
			binding[e.Node+"\x00"+string(r.Resource)] = true
		}
	}
	index := resources.NewIndex(m.tree.ResourceNames()...)
	request := index.Requests(requests)
	for n, depth := leaf, 0; depth < maxWalkDepth; depth++ {
		qn := m.quotaNode(n)
		for i := range qn.Resources {
			r := &qn.Resources[i]
			pos, _ := index.Position(corev1.ResourceName(r.Resource))
			r.Request = index.Format(pos, request[pos])
			r.Binding = binding[n.Name()+"\x00"+r.Resource]
		}
		out.Path = append(out.Path, qn)
		parent, ok := n.Parent()
		if !ok {
			break
		}
		n = parent
	}
	if len(v.Excesses) > 0 && len(v.Excesses[0].Resources) > 0 {
		first := v.Excesses[0]
		if node, ok := m.tree.Node(first.Node); ok {
			out.ContributorsOf = first.Node
			out.Contributors, out.MoreContributors = contributors(m.tree, node, first.Resources[0].Resource, pods, top)
		}
	}
	return out
}

// explainCapacity looks at every node group the autoscaler reports: can a node
// like its template host the pod, and may it grow by one more node.
func explainCapacity(s Snapshot, pod *corev1.Pod, requests corev1.ResourceList) (*CapacityExplanation, []string) {
	var notes []string
	out := &CapacityExplanation{AutoscalerStatus: AutoscalerStatusNotFound, NodeGroups: []NodeGroupFit{}}
	if s.Autoscaler != nil {
		out.AutoscalerStatus = s.Autoscaler.Source
		if !s.Autoscaler.Time.IsZero() {
			t := s.Autoscaler.Time
			out.StatusTime = &t
		}
	}
	notes = append(notes, staleStatusNotes(s)...)
	groups := nodeGroups(s.Autoscaler, s.Nodes)
	set, unknown := quotaSet(s.Quotas, s.Nodes, groups)
	byName := map[string]int{}
	for i, q := range s.Quotas {
		if q != nil {
			if _, dup := byName[q.Name]; !dup {
				byName[q.Name] = i
			}
		}
	}
	matching := map[string]bool{}
	templatesKnown := s.Autoscaler != nil
	for _, g := range groups {
		fit := NodeGroupFit{Name: g.status.Name, MinSize: g.status.MinSize, MaxSize: g.status.MaxSize,
			Target: g.status.Target, Registered: g.registered, Upcoming: g.upcoming}
		if g.template == nil {
			fit.Why = "no registered node of the group to read its labels, taints and capacity from"
			if g.registered > 0 {
				fit.Why = fmt.Sprintf("none of the %d nodes the autoscaler counts was found: its status may be stale, or the provider marks its nodes in a way kubectl-quota does not know", g.registered)
			}
			templatesKnown = false
			out.NodeGroups = append(out.NodeGroups, fit)
			continue
		}
		fit.Template = g.template.Name
		fit.Quotas = set.MatchingQuotas(g.template)
		fit.CanHost, fit.Why = canHost(pod, requests, g.template)
		if fit.CanHost {
			if g.status.Target >= g.status.MaxSize {
				fit.Blocked = append(fit.Blocked, fmt.Sprintf("node group %q is at its max size %d", g.status.Name, g.status.MaxSize))
			}
			if g.status.Backoff != "" {
				fit.Blocked = append(fit.Blocked, fmt.Sprintf("node group %q is in backoff: %s", g.status.Name, g.status.Backoff))
			}
			if g.status.Unhealthy != "" {
				fit.Blocked = append(fit.Blocked, fmt.Sprintf("node group %q is unhealthy: %s", g.status.Name, g.status.Unhealthy))
			}
			if s.Autoscaler != nil && s.Autoscaler.Unhealthy != "" {
				fit.Blocked = append(fit.Blocked, "the cluster is unhealthy, so the autoscaler scales nothing: "+s.Autoscaler.Unhealthy)
			}
			if allowed, exceeded := set.AllowedDelta(g.template, 1); allowed == 0 {
				for _, e := range exceeded {
					if i, ok := byName[e.Quota]; ok {
						for _, name := range e.Resources {
							fit.Blocked = append(fit.Blocked, refusal(set, s.Quotas[i], name, g.template))
						}
					}
				}
			}
			fit.CanGrow = len(fit.Blocked) == 0
			for _, q := range fit.Quotas {
				matching[q] = true
			}
		}
		out.NodeGroups = append(out.NodeGroups, fit)
	}
	hosting := slices.ContainsFunc(out.NodeGroups, func(f NodeGroupFit) bool { return f.CanHost })
	for _, q := range sortedQuotas(s.Quotas) {
		if matching[q.Name] {
			out.Quotas = append(out.Quotas, quotaView(q, set, groups, s.NodesListed, s.Autoscaler != nil))
		}
	}
	if !hosting && !templatesKnown && len(s.Quotas) > 0 {
		out.Quotas = quotasBySelector(pod, s.Quotas)
		notes = append(notes, "no node group able to host the pod is known: CapacityQuotas are listed by the pod's nodeSelector, with status.used and without upcoming nodes")
	}
	if len(unknown) > 0 {
		notes = append(notes, fmt.Sprintf("node group(s) %s have upcoming nodes but no registered node: their upcoming capacity is not counted", strings.Join(unknown, ", ")))
	}
	return out, notes
}

// verdict is the one-line answer, most specific cause first: placement, a
// reclaim under way, the tree's refusal, then what the autoscaler can do.
func verdict(pod *corev1.Pod, gx *GangExplanation, eq *ElasticQuotaExplanation, capx *CapacityExplanation, events []Event) string {
	gangSays := ""
	if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Status.NominatedNodeName == "" {
		gangSays = gangVerdict(gx, eq)
	}
	switch {
	case gangSays != "":
		return gangSays
	case pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodPending:
		return fmt.Sprintf("Scheduled on node %s, containers not running yet", pod.Spec.NodeName)
	case pod.Spec.NodeName != "":
		return fmt.Sprintf("%s on node %s", pod.Status.Phase, pod.Spec.NodeName)
	case pod.DeletionTimestamp != nil:
		return "Terminating before it was scheduled"
	case pod.Status.NominatedNodeName != "":
		return fmt.Sprintf("Pending: nominated to node %s, waiting for preempted pods to leave", pod.Status.NominatedNodeName)
	case eq != nil && !eq.Admitted:
		return "Pending: refused by " + elasticRefusal(eq)
	}
	if capx != nil && len(capx.NodeGroups) > 0 {
		if v := capacityVerdict(capx); v != "" {
			return "Pending: " + v
		}
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Reason == "FailedScheduling" || events[i].Reason == "NotTriggerScaleUp" {
			return "Pending: " + events[i].Message
		}
	}
	return "Pending: not scheduled yet"
}

// elasticRefusal names the deepest node the request does not fit, with the
// numbers of each exceeded resource.
func elasticRefusal(eq *ElasticQuotaExplanation) string {
	for _, n := range eq.Path {
		var parts []string
		for _, r := range n.Resources {
			if r.Binding {
				parts = append(parts, fmt.Sprintf("%s (used %s + request %s > max %s)", r.Resource, r.Used, r.Request, r.Max))
			}
		}
		if len(parts) > 0 {
			return fmt.Sprintf("ElasticQuotaTree node %q on %s", n.Name, strings.Join(parts, ", "))
		}
	}
	return "ElasticQuotaTree: " + eq.Message
}

func capacityVerdict(capx *CapacityExplanation) string {
	var hosting []NodeGroupFit
	for _, g := range capx.NodeGroups {
		if g.CanHost {
			hosting = append(hosting, g)
		}
	}
	if len(hosting) == 0 {
		var whys []string
		for _, g := range capx.NodeGroups {
			if g.Template == "" {
				return "" // a group whose labels are unknown might host it
			}
			whys = append(whys, fmt.Sprintf("%s: %s", g.Name, g.Why))
		}
		return "no node group can host it (" + strings.Join(whys, "; ") + ")"
	}
	for _, g := range hosting {
		if g.Upcoming > 0 {
			return fmt.Sprintf("waiting for %d upcoming node(s) of node group %q", g.Upcoming, g.Name)
		}
	}
	for _, g := range hosting {
		if g.CanGrow {
			return fmt.Sprintf("node group %q can host it and may grow; waiting for the autoscaler", g.Name)
		}
	}
	return "no node group may grow: " + hosting[0].Blocked[0]
}
