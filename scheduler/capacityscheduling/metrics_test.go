package capacityscheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// TestMetrics reads the plugin's metrics the way Prometheus scrapes them from
// kube-scheduler's registry.
func TestMetrics(t *testing.T) {
	const tree = `
spec:
  root:
    name: root
    min: {cpu: 8, memory: 8Gi}
    max: {cpu: 8, memory: 8Gi}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 2}, max: {cpu: 4}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 6}}
`
	h := newHarness(t, world{tree: tree, nodes: []*corev1.Node{node("n1", "16")}, pods: []*corev1.Pod{
		testPod("a-1", "team-a", "3", "n1", low, 0),
	}})
	h.plugin.cache.exportMetrics()
	for _, p := range []*corev1.Pod{
		testPod("fits", "team-a", "1", "", low, 0),
		testPod("too-big", "team-a", "2", "", low, 0),
		testPod("free", "default", "100", "", low, 0),
	} {
		h.plugin.PreFilter(h.ctx, framework.NewCycleState(), p, nil)
	}
	h.plugin.cache.metrics.reclaim("team-b", reclaimFailed)
	// A refused pod that is deleted is no longer pending.
	gone := testPod("gone", "team-a", "2", "", low, 0)
	h.plugin.PreFilter(h.ctx, framework.NewCycleState(), gone, nil)
	h.plugin.cache.deletePod(gone)

	const want = `
# HELP quotascale_elastic_quota_admitted_total [ALPHA] Scheduling attempts the ElasticQuotaTree admitted, by the pod's leaf.
# TYPE quotascale_elastic_quota_admitted_total counter
quotascale_elastic_quota_admitted_total{quota_node="team-a"} 1
# HELP quotascale_elastic_quota_borrowed [ALPHA] How far a quota node's used is above its min (0 when it is not).
# TYPE quotascale_elastic_quota_borrowed gauge
quotascale_elastic_quota_borrowed{quota_node="root",resource="cpu"} 0
quotascale_elastic_quota_borrowed{quota_node="root",resource="memory"} 0
quotascale_elastic_quota_borrowed{quota_node="team-a",resource="cpu"} 1
quotascale_elastic_quota_borrowed{quota_node="team-b",resource="cpu"} 0
# HELP quotascale_elastic_quota_max [ALPHA] Max of a quota node, for every resource it limits.
# TYPE quotascale_elastic_quota_max gauge
quotascale_elastic_quota_max{quota_node="root",resource="cpu"} 8
quotascale_elastic_quota_max{quota_node="root",resource="memory"} 8.589934592e+09
quotascale_elastic_quota_max{quota_node="team-a",resource="cpu"} 4
# HELP quotascale_elastic_quota_min [ALPHA] Guaranteed min of a quota node, for every resource its min names.
# TYPE quotascale_elastic_quota_min gauge
quotascale_elastic_quota_min{quota_node="root",resource="cpu"} 8
quotascale_elastic_quota_min{quota_node="root",resource="memory"} 8.589934592e+09
quotascale_elastic_quota_min{quota_node="team-a",resource="cpu"} 2
quotascale_elastic_quota_min{quota_node="team-b",resource="cpu"} 6
# HELP quotascale_elastic_quota_pending_pods [ALPHA] Pods whose last scheduling attempt the ElasticQuotaTree refused because they would take this quota node past its max on this resource.
# TYPE quotascale_elastic_quota_pending_pods gauge
quotascale_elastic_quota_pending_pods{quota_node="team-a",resource="cpu"} 1
# HELP quotascale_elastic_quota_reclaims_total [ALPHA] Reclaims of a leaf's guaranteed min by result: started, placed (the preemptor was bound), failed (no preemption could be started), expired (the preemptor was not placed in time).
# TYPE quotascale_elastic_quota_reclaims_total counter
quotascale_elastic_quota_reclaims_total{quota_node="team-b",result="failed"} 1
# HELP quotascale_elastic_quota_refused_total [ALPHA] Scheduling attempts the ElasticQuotaTree refused, once per quota node and resource the request would take past max.
# TYPE quotascale_elastic_quota_refused_total counter
quotascale_elastic_quota_refused_total{quota_node="team-a",resource="cpu"} 2
# HELP quotascale_elastic_quota_tree_valid [ALPHA] 1 when the current generation of an ElasticQuotaTree (namespace/name) is valid, 0 when it is not.
# TYPE quotascale_elastic_quota_tree_valid gauge
quotascale_elastic_quota_tree_valid{tree="kube-system/elasticquotatree"} 1
# HELP quotascale_elastic_quota_used [ALPHA] Requests charged to a quota node (its subtree's bound pods plus quota held for a reclaim); cpu in cores, memory in bytes.
# TYPE quotascale_elastic_quota_used gauge
quotascale_elastic_quota_used{quota_node="root",resource="cpu"} 3
quotascale_elastic_quota_used{quota_node="root",resource="memory"} 0
quotascale_elastic_quota_used{quota_node="team-a",resource="cpu"} 3
quotascale_elastic_quota_used{quota_node="team-b",resource="cpu"} 0
`
	names := []string{"admitted_total", "borrowed", "max", "min", "pending_pods", "reclaims_total", "refused_total", "tree_valid", "used"}
	for i, n := range names {
		names[i] = "quotascale_elastic_quota_" + n
	}
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// TestMetricsOfRemovedQuotaNodes: the counters of a quota node that leaves the
// tree in force, and of every node of a tree no longer in force, are deleted
// rather than exported for as long as the scheduler runs.
func TestMetricsOfRemovedQuotaNodes(t *testing.T) {
	counters := []string{"quotascale_elastic_quota_admitted_total", "quotascale_elastic_quota_reclaims_total", "quotascale_elastic_quota_refused_total"}
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}, pods: []*corev1.Pod{
		testPod("b-1", "team-b", "4", "n1", low, 0),
	}})
	h.plugin.cache.exportMetrics()
	// Other tests of the package count into the same process-wide counters.
	admittedTotal.Reset()
	refusedTotal.Reset()
	reclaimsTotal.Reset()
	for _, p := range []*corev1.Pod{
		testPod("a-fits", "team-a", "1", "", low, 0),
		testPod("a-huge", "team-a", "20", "", low, 0),
		testPod("b-huge", "team-b", "20", "", low, 0),
	} {
		h.plugin.PreFilter(h.ctx, framework.NewCycleState(), p, nil)
	}
	h.plugin.cache.mu.Lock()
	h.plugin.cache.reclaimLocked("team-b", reclaimFailed)
	h.plugin.cache.mu.Unlock()

	// Generation 2 drops team-b.
	trees := h.trees.Resource(treesResource).Namespace(schedulingv1beta1.EnforcedNamespace)
	withoutB := treeObject(t, `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 8}, max: {cpu: 16}}
    - {name: spot, namespaces: [spot], max: {cpu: 4}, attributes: {resourceflavors: spot}}
`)
	withoutB.Generation = 2
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(withoutB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trees.Update(h.ctx, &unstructured.Unstructured{Object: raw}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the tree: %v", err)
	}
	h.waitForTree("generation 2 in force", func(tree *elastic.Tree) bool {
		if tree == nil {
			return false
		}
		_, hasB := tree.Node("team-b")
		return !hasB
	})
	const kept = `
# HELP quotascale_elastic_quota_admitted_total [ALPHA] Scheduling attempts the ElasticQuotaTree admitted, by the pod's leaf.
# TYPE quotascale_elastic_quota_admitted_total counter
quotascale_elastic_quota_admitted_total{quota_node="team-a"} 1
# HELP quotascale_elastic_quota_refused_total [ALPHA] Scheduling attempts the ElasticQuotaTree refused, once per quota node and resource the request would take past max.
# TYPE quotascale_elastic_quota_refused_total counter
quotascale_elastic_quota_refused_total{quota_node="root",resource="cpu"} 2
quotascale_elastic_quota_refused_total{quota_node="team-a",resource="cpu"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(kept), counters...); err != nil {
		t.Errorf("after team-b left the tree: %v", err)
	}

	if err := trees.Delete(h.ctx, "elasticquotatree", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the tree: %v", err)
	}
	h.waitForTree("no tree in force", func(tree *elastic.Tree) bool { return tree == nil })
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""), counters...); err != nil {
		t.Errorf("after the tree was deleted: %v", err)
	}
}
