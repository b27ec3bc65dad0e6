package report

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// contributors answers "what raised the total" of a quota node: its bound pods
// grouped by namespace and workload, with their summed requests. Largest first
// on resource, because the biggest share is what a person can act on; ties go
// to the most recent, because a budget that was comfortable for months is
// usually exhausted by something new. It returns at most top entries and how
// many more there were.
func contributors(tree *elastic.Tree, node elastic.Node, resource corev1.ResourceName, pods []*corev1.Pod, top int) ([]Contributor, int) {
	namespaces := map[string]bool{}
	var collect func(n elastic.Node, depth int)
	collect = func(n elastic.Node, depth int) {
		for _, ns := range n.Namespaces() {
			namespaces[ns] = true
		}
		if depth < maxWalkDepth {
			for _, c := range n.Children() {
				collect(c, depth+1)
			}
		}
	}
	collect(node, 1)

	index := resources.NewIndex(tree.ResourceNames()...)
	type sum struct {
		c     Contributor
		total resources.Vector
	}
	sums := map[string]*sum{}
	for _, p := range pods {
		if !elastic.Charged(p) || !namespaces[p.Namespace] {
			continue
		}
		workload := workloadOf(p)
		key := p.Namespace + "/" + workload
		s, ok := sums[key]
		if !ok {
			s = &sum{c: Contributor{Namespace: p.Namespace, Workload: workload}, total: index.Zero()}
			sums[key] = s
		}
		s.c.Pods++
		s.total.Add(index.Requests(resources.PodRequests(p)))
		if created := p.CreationTimestamp.Time; created.After(s.c.Newest) {
			s.c.Newest = created
		}
	}
	pos, ok := index.Position(resource)
	if !ok {
		pos = -1
	}
	all := make([]*sum, 0, len(sums))
	for _, s := range sums {
		s.c.Requests = map[string]string{}
		for i, name := range index.Names() {
			if s.total[i] > 0 {
				s.c.Requests[string(name)] = index.Format(i, s.total[i])
			}
		}
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *sum) int {
		if pos >= 0 && a.total[pos] != b.total[pos] {
			return cmp.Compare(b.total[pos], a.total[pos])
		}
		if !a.c.Newest.Equal(b.c.Newest) {
			return b.c.Newest.Compare(a.c.Newest)
		}
		return strings.Compare(a.c.Namespace+"/"+a.c.Workload, b.c.Namespace+"/"+b.c.Workload)
	})
	if top < 0 {
		top = 0
	}
	more := max(0, len(all)-top)
	out := make([]Contributor, 0, min(top, len(all)))
	for _, s := range all[:len(all)-more] {
		out = append(out, s.c)
	}
	return out, more
}

// workloadOf names a pod's workload: its controller, with a ReplicaSet that
// carries the pod-template-hash suffix read as its Deployment, or the pod itself.
func workloadOf(p *corev1.Pod) string {
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return "Pod/" + p.Name
	}
	if owner.Kind == "ReplicaSet" {
		if hash := p.Labels["pod-template-hash"]; hash != "" {
			if deployment, ok := strings.CutSuffix(owner.Name, "-"+hash); ok && deployment != "" {
				return "Deployment/" + deployment
			}
		}
	}
	return owner.Kind + "/" + owner.Name
}
