package report

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	workloadv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
)

// explainGang reads pod's gang from the snapshot as the scheduler reads it
// (quota/gang), or returns nil for a pod in no gang. The request is what the
// tree must admit for pod: the gang's outstanding request while the gang is
// not whole, nil when pod is judged alone.
func explainGang(s Snapshot, pod *corev1.Pod, charger gang.Charger) (*GangExplanation, corev1.ResourceList) {
	key, ok := gang.RefOf(pod)
	if !ok {
		return nil, nil
	}
	out := &GangExplanation{Gang: key.String(), Source: string(key.Kind)}
	lookup := func(namespace, name string) (*workloadv1beta1.PodGroup, bool) {
		pg := s.PodGroup
		return pg, pg != nil && pg.Namespace == namespace && pg.Name == name
	}
	if pg, found := lookup(key.Namespace, key.Name); found && key.Kind == gang.KindPodGroup {
		out.Scheduled = initiallyScheduled(pg)
	}
	g, isGang, err := gang.Of(pod, lookup)
	if err != nil {
		out.Problem = err.Error()
		return out, nil
	}
	if !isGang {
		return nil, nil // a PodGroup with the basic policy: pods go one by one
	}
	out.MinCount = g.MinCount
	members := gang.Members(g.Key, withPod(s.GangPods, pod))
	out.Pods = len(members)
	for i, m := range members {
		if elastic.Charged(m) {
			out.Bound++
		}
		out.Members = append(out.Members, GangMember{Pod: m.Name, Node: m.Spec.NodeName, Phase: m.Status.Phase, Counted: i < int(g.MinCount)})
	}
	request, standIns, ok := gang.Outstanding(g, members, elastic.Charged, pod, charger)
	if !ok {
		out.Whole = true
		return out, nil
	}
	out.Request, out.StandIns = map[string]string{}, standIns
	for _, name := range sortedNames(request) {
		q := request[name]
		out.Request[string(name)] = q.String()
	}
	return out, request
}

// withPod is pods with pod among them, so that the explained pod counts even
// when the list of its namespace's pods could not be read.
func withPod(pods []*corev1.Pod, pod *corev1.Pod) []*corev1.Pod {
	for _, p := range pods {
		if p.Namespace == pod.Namespace && p.Name == pod.Name {
			return pods
		}
	}
	return append(append([]*corev1.Pod(nil), pods...), pod)
}

func initiallyScheduled(pg *workloadv1beta1.PodGroup) *Condition {
	c := meta.FindStatusCondition(pg.Status.Conditions, workloadv1beta1.PodGroupInitiallyScheduled)
	if c == nil {
		return nil
	}
	return &Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// PodGroupPod is the pod through which `explain podgroup/NAME` explains a
// PodGroup: the first of its pods that is not bound, which the scheduler
// tries next, or its first pod when all are bound; nil when it has none.
func PodGroupPod(s Snapshot, namespace, name string) *corev1.Pod {
	members := gang.Members(gang.Key{Kind: gang.KindPodGroup, Namespace: namespace, Name: name}, s.GangPods)
	for _, m := range members {
		if !elastic.Charged(m) {
			return m
		}
	}
	if len(members) > 0 {
		return members[0]
	}
	return nil
}

// ExplainEmptyPodGroup answers for a PodGroup none of whose pods exists:
// nothing asks its quota yet, and kube-scheduler waits for MinCount pods.
func ExplainEmptyPodGroup(s Snapshot, pg *workloadv1beta1.PodGroup) PodExplanation {
	key := gang.Key{Kind: gang.KindPodGroup, Namespace: pg.Namespace, Name: pg.Name}
	gx := &GangExplanation{Gang: key.String(), Source: string(key.Kind), Scheduled: initiallyScheduled(pg)}
	verdict := fmt.Sprintf("PodGroup %s has no pods: it is not a gang (basic policy), pods are judged one by one", key)
	g, isGang, err := gang.FromPodGroup(pg)
	switch {
	case err != nil:
		gx.Problem = err.Error()
		verdict = "Pending: " + err.Error()
	case isGang:
		gx.MinCount = g.MinCount
		verdict = fmt.Sprintf("No pod of gang %s exists yet: it asks its quota for nothing until its pods are created, and the scheduler waits for %d of them", key, g.MinCount)
	}
	return PodExplanation{Kind: "PodExplanation", APIVersion: APIVersion, Verdict: verdict, Requests: map[string]string{},
		Gang: gx, Events: []Event{}, Notes: append([]string(nil), s.Notes...)}
}

// gangVerdict is the verdict on a pending pod of a gang that is not whole,
// or "" when the gang's quota and size leave the pod to the other causes.
func gangVerdict(gx *GangExplanation, eq *ElasticQuotaExplanation) string {
	switch {
	case gx == nil || gx.Whole:
		return ""
	case gx.Problem != "":
		return "Pending: the gang cannot be read: " + gx.Problem
	case eq != nil && !eq.Admitted:
		return fmt.Sprintf("Pending: gang %s of %d pods is not admitted whole, so none of its pods is: refused by %s",
			gx.Gang, gx.MinCount, elasticRefusal(eq))
	case gx.Pods < int(gx.MinCount):
		return fmt.Sprintf("Pending: gang %s has %d of its %d pods; the scheduler places none until all %d exist",
			gx.Gang, gx.Pods, gx.MinCount, gx.MinCount)
	}
	return ""
}

// gangCharger charges a gang's members as explain charges a pod (podCharge):
// their devices count, and a shared claim a bound pod uses is charged
// already. Without a lookup, or a model, it counts requests.
func gangCharger(lookup claims.Lookup, m *model) gang.Charger {
	if lookup == nil || m == nil {
		return gang.Charger{}
	}
	return gang.Charger{
		Charge: func(p *corev1.Pod) claims.Charge {
			ch, _ := claims.PodCharge(p, lookup)
			return ch
		},
		SharedCharged: func(key types.UID) bool { return m.live != nil && m.live.Tracks(key) },
	}
}

// gangRequests is the request explain judges for pod: its gang's while the
// gang is not whole and pod holds no quota of its own yet.
func gangRequests(pod *corev1.Pod, own, gangRequest corev1.ResourceList) (corev1.ResourceList, bool) {
	if gangRequest == nil || elastic.Charged(pod) {
		return own, false
	}
	return gangRequest, true
}
