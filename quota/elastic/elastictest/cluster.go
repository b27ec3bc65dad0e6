// Package elastictest is one cluster, step by step, that the scheduler's
// plugin, the autoscaler's elasticquota processor and kubectl-quota are each
// fed in their own tests, with the answer all three must give: which
// generation of the tree is in force and what every quota node uses. The
// answers are written out by hand, not computed with package elastic, so the
// programs agree with each other by agreeing with them.
package elastictest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// Step is the whole cluster at one moment.
type Step struct {
	Name string
	// Trees are every ElasticQuotaTree object; Pods every pod.
	Trees []*schedulingv1beta1.ElasticQuotaTree
	Pods  []*corev1.Pod
	// Want is what every program must find.
	Want InForce
}

// InForce is the tree in force as a program sees it.
type InForce struct {
	// Generation is the generation of kube-system/elasticquotatree in force.
	Generation int64
	// Nodes are the figures of every quota node of that generation.
	Nodes map[string]Node
}

// Node is one quota node's figures.
type Node struct {
	Used, Min, Max corev1.ResourceList
}

// Scheduler is the scheduler every pod of the cluster names.
const Scheduler = "quotascale-scheduler"

// TreeName is the name of the tree in kube-system.
const TreeName = "elasticquotatree"

var (
	epoch   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deleted = metav1.NewTime(epoch.Add(time.Minute))
)

// Steps are the cluster's moments, in order: a valid tree; an invalid update
// (with status.lastValid as the scheduler recorded it) while pods come and go;
// a valid update that governs one more namespace and lowers a max below use.
func Steps() []Step {
	first := tree(1, spec("4", "8", "32Gi", nil))
	invalid := tree(2, spec("12", "8", "32Gi", &teamC)) // team-a's min over its max
	recorded(invalid, first)
	third := tree(3, spec("4", "6", "24Gi", &teamC))
	recorded(third, first)
	elsewhere := tree(1, spec("1", "1", "1Gi", nil))
	elsewhere.Namespace, elsewhere.UID = "team-b", "elsewhere"

	aPending := pod("a-pending", "team-a", "3", "4Gi", "")
	aBound := pod("a-pending", "team-a", "3", "4Gi", "n2")
	bNew := pod("b-new", "team-b", "1", "1Gi", "n1")
	common := []*corev1.Pod{
		pod("a-running", "team-a", "2", "4Gi", "n1"),
		phase(pod("a-bound-not-started", "team-a", "500m", "1Gi", "n1"), corev1.PodPending),
		nominated(pod("a-nominated", "team-a", "2", "2Gi", ""), "n2"),
		pod("b-running", "team-b", "3", "8Gi", "n2"),
		phase(pod("b-failed", "team-b", "4", "4Gi", "n1"), corev1.PodFailed),
		terminating(pod("b-deleted-before-binding", "team-b", "4", "4Gi", "")),
		pod("c-running", "team-c", "2", "2Gi", "n1"),
		pod("default-running", "default", "5", "5Gi", "n1"),
	}
	aTerminating := terminating(pod("a-terminating", "team-a", "1", "2Gi", "n1"))
	aDisrupted := disrupted(pod("a-disrupted", "team-a", "1", "2Gi", "n2"))
	bSucceeded := phase(pod("b-succeeded", "team-b", "4", "4Gi", "n2"), corev1.PodSucceeded)

	return []Step{{
		Name:  "a valid tree",
		Trees: []*schedulingv1beta1.ElasticQuotaTree{first, elsewhere},
		Pods:  append([]*corev1.Pod{aTerminating, aDisrupted, bSucceeded, aPending}, common...),
		Want: InForce{Generation: 1, Nodes: map[string]Node{
			// a: 2 + 500m + 1 (terminating) + 1 (disrupted); b: 3.
			"root":   {Used: list("7500m", "17Gi"), Min: list("10", "40Gi"), Max: list("10", "40Gi")},
			"team-a": {Used: list("4500m", "9Gi"), Min: list("4", "16Gi"), Max: list("8", "32Gi")},
			"team-b": {Used: list("3", "8Gi"), Min: list("6", "24Gi"), Max: list("10", "40Gi")},
		}},
	}, {
		Name:  "an invalid update; the terminating pod is gone, a-pending is bound",
		Trees: []*schedulingv1beta1.ElasticQuotaTree{invalid, elsewhere},
		Pods:  append([]*corev1.Pod{aDisrupted, bSucceeded, aBound}, common...),
		Want: InForce{Generation: 1, Nodes: map[string]Node{
			// a: 2 + 500m + 1 (disrupted) + 3; b: 3.
			"root":   {Used: list("9500m", "19Gi"), Min: list("10", "40Gi"), Max: list("10", "40Gi")},
			"team-a": {Used: list("6500m", "11Gi"), Min: list("4", "16Gi"), Max: list("8", "32Gi")},
			"team-b": {Used: list("3", "8Gi"), Min: list("6", "24Gi"), Max: list("10", "40Gi")},
		}},
	}, {
		Name:  "a valid update governing team-c; the disrupted pod is gone, b-new is bound",
		Trees: []*schedulingv1beta1.ElasticQuotaTree{third, elsewhere},
		Pods:  append([]*corev1.Pod{bSucceeded, aBound, bNew}, common...),
		Want: InForce{Generation: 3, Nodes: map[string]Node{
			// a: 2 + 500m + 3, over its new max; b: 3 + 1; c: 2.
			"root":   {Used: list("11500m", "20Gi"), Min: list("10", "40Gi"), Max: list("10", "40Gi")},
			"team-a": {Used: list("5500m", "9Gi"), Min: list("4", "16Gi"), Max: list("6", "24Gi")},
			"team-b": {Used: list("4", "9Gi"), Min: list("6", "24Gi"), Max: list("10", "40Gi")},
			"team-c": {Used: list("2", "2Gi"), Max: list("4", "8Gi")},
		}},
	}}
}

// Diff is empty when got is want. Otherwise it lists, one figure a line, what
// want has and got lacks ("-") and what got has instead ("+"). Quantities
// compare by value, and zero ones are left out: a program may list an unused
// resource as 0 or not at all.
func Diff(want, got InForce) string {
	w, g := figures(want), figures(got)
	var out []string
	for _, line := range w {
		if !slices.Contains(g, line) {
			out = append(out, "- "+line)
		}
	}
	for _, line := range g {
		if !slices.Contains(w, line) {
			out = append(out, "+ "+line)
		}
	}
	return strings.Join(out, "\n")
}

// figures are in's figures, one a line, sorted.
func figures(in InForce) []string {
	out := []string{fmt.Sprintf("generation %d", in.Generation)}
	for name, n := range in.Nodes {
		for kind, list := range map[string]corev1.ResourceList{"used": n.Used, "min": n.Min, "max": n.Max} {
			for resourceName, q := range list {
				if !q.IsZero() {
					canonical := resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)
					out = append(out, fmt.Sprintf("%s %s %s %s", name, kind, resourceName, canonical))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

var teamC = schedulingv1beta1.ElasticQuotaSpec{Name: "team-c", Namespaces: []string{"team-c"}, Min: list("0", "0"), Max: list("4", "8Gi")}

func spec(aMin, aMax, aMaxMemory string, extra *schedulingv1beta1.ElasticQuotaSpec) schedulingv1beta1.ElasticQuotaTreeSpec {
	root := schedulingv1beta1.ElasticQuotaSpec{Name: "root", Min: list("10", "40Gi"), Max: list("10", "40Gi"), Children: []schedulingv1beta1.ElasticQuotaSpec{
		{Name: "team-a", Namespaces: []string{"team-a"}, Min: list(aMin, "16Gi"), Max: list(aMax, aMaxMemory)},
		{Name: "team-b", Namespaces: []string{"team-b"}, Min: list("6", "24Gi"), Max: list("10", "40Gi")},
	}}
	if extra != nil {
		root.Children = append(root.Children, *extra.DeepCopy())
	}
	return schedulingv1beta1.ElasticQuotaTreeSpec{Root: root}
}

func tree(generation int64, s schedulingv1beta1.ElasticQuotaTreeSpec) *schedulingv1beta1.ElasticQuotaTree {
	return &schedulingv1beta1.ElasticQuotaTree{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "ElasticQuotaTree"},
		ObjectMeta: metav1.ObjectMeta{Namespace: schedulingv1beta1.EnforcedNamespace, Name: TreeName, UID: "tree",
			Generation: generation, CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour))},
		Spec: s,
	}
}

// recorded gives obj the status.lastValid the scheduler writes while valid
// generation is in force.
func recorded(obj, valid *schedulingv1beta1.ElasticQuotaTree) {
	obj.Status.ObservedGeneration = valid.Generation
	obj.Status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: valid.Generation, Spec: *valid.Spec.DeepCopy()}
}

func list(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// pod requests cpu and memory in namespace; bound to node unless it is empty,
// and then Running.
func pod(name, namespace, cpu, memory, node string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(fmt.Sprintf("%s/%s", namespace, name)),
			CreationTimestamp: metav1.NewTime(epoch)},
		Spec: corev1.PodSpec{SchedulerName: Scheduler, NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: list(cpu, memory)}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node != "" {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

func phase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func nominated(p *corev1.Pod, node string) *corev1.Pod {
	p.Status.NominatedNodeName = node
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &deleted
	p.Finalizers = []string{"example.com/keep"}
	return p
}

func disrupted(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}
	return p
}
