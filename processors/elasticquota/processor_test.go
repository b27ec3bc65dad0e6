package elasticquota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors"
)

func tree(leafMin, leafMax string, generation int64) *schedulingv1beta1.ElasticQuotaTree {
	return &schedulingv1beta1.ElasticQuotaTree{
		ObjectMeta: metav1.ObjectMeta{Name: "elasticquotatree", Namespace: "kube-system", UID: "tree", Generation: generation},
		Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: schedulingv1beta1.ElasticQuotaSpec{
			Name: "root",
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")},
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")},
			Children: []schedulingv1beta1.ElasticQuotaSpec{{
				Name: "root.a.1", Namespaces: []string{"namespace1"},
				Min: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(leafMin)},
				Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(leafMax)},
			}},
		}},
	}
}

func pod(name, node, nominated string, created int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "namespace1", UID: types.UID(name), CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec: corev1.PodSpec{NodeName: node, SchedulerName: quotaScheduler, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}}},
		Status: corev1.PodStatus{NominatedNodeName: nominated, Phase: corev1.PodRunning},
	}
}

func newProcessor(t *testing.T, trees []*schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod) (*Processor, cache.Store) {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, tr := range trees {
		_ = store.Add(tr)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		_ = idx.Add(p)
	}
	return New(store, corelisters.NewPodLister(idx), []string{quotaScheduler}), store
}

// quotaScheduler enforces the tree in these tests.
const quotaScheduler = "quotascale-scheduler"

// TestOnlyPodsOfEnforcingSchedulersAreJudged: a pod of a scheduler that does
// not run CapacityScheduling gets its scale-up however full its leaf is.
func TestOnlyPodsOfEnforcingSchedulersAreJudged(t *testing.T) {
	governed := pod("governed", "", "", 1)
	stock := pod("stock", "", "", 2)
	stock.Spec.SchedulerName = corev1.DefaultSchedulerName
	pending := []*corev1.Pod{governed, stock}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", "0", 1)}, pending)
	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"stock"}, names(kept)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if len(refused) != 1 || refused[0].Pod != governed {
		t.Errorf("refused %d pods, want only the governed one", len(refused))
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestLoopAdmitsOnlyWhatTheLeafHasRoomFor(t *testing.T) {
	bound := []*corev1.Pod{pod("bound-1", "n1", "", 0), pod("bound-2", "n1", "", 0)}
	var pending []*corev1.Pod
	for i := 0; i < 10; i++ {
		// Created newest first, so admission order (oldest first) is not input order.
		pending = append(pending, pod(fmt.Sprintf("pending-%d", i), "", "", int64(100-i)))
	}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("10", "20", 1)}, append(bound, pending...))
	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	// 10 of 20 cpu used: room for two 5-cpu pods, the two oldest.
	if diff := cmp.Diff([]string{"pending-9", "pending-8"}, names(kept)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if len(refused) != 8 {
		t.Fatalf("refused %d pods, want 8", len(refused))
	}
	want := processors.Reason{
		MessageID: processors.MessagePodRefused,
		Parameters: []string{
			`exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`,
			`exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20`,
		},
		Message: `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`,
	}
	if diff := cmp.Diff(want, refused[0].Reason); diff != "" {
		t.Errorf("reason (-want +got):\n%s", diff)
	}
}

func TestNominatedPodsTakeTheirQuotaFirst(t *testing.T) {
	nominated := pod("preemptor", "", "n1", 0)
	pending := []*corev1.Pod{pod("newcomer", "", "", 1)}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", "5", 1)}, append(pending, nominated))
	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 0 || len(refused) != 1 {
		t.Errorf("kept %v refused %d; the nominated pod's 5 cpu should fill the leaf", names(kept), len(refused))
	}
}

func TestInvalidGenerationKeepsTheLastValidTree(t *testing.T) {
	pending := []*corev1.Pod{pod("a", "", "", 1), pod("b", "", "", 2)}
	p, store := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", "5", 1)}, pending)
	if kept, _, _ := p.Process(context.Background(), &processors.LoopContext{}, pending); len(kept) != 1 {
		t.Fatalf("kept %v under max 5", names(kept))
	}
	// min 10 > max 1 is invalid: the max-5 tree stays in force.
	_ = store.Update(tree("10", "1", 2))
	if kept, _, _ := p.Process(context.Background(), &processors.LoopContext{}, pending); len(kept) != 1 {
		t.Errorf("kept %v after an invalid update; want the max-5 tree still in force", names(kept))
	}
	_ = store.Delete(tree("10", "1", 2))
	if kept, refused, _ := p.Process(context.Background(), &processors.LoopContext{}, pending); len(kept) != 2 || len(refused) != 0 {
		t.Errorf("without a tree every pod is kept; got kept %v refused %d", names(kept), len(refused))
	}
}

// A processor started while the spec is invalid (an autoscaler restarted after
// an edit that got past the webhook) enforces the last valid generation the
// scheduler recorded in status, not nothing.
func TestRestartWhileInvalidUsesTheRecordedGeneration(t *testing.T) {
	pending := []*corev1.Pod{pod("a", "", "", 1), pod("b", "", "", 2)}
	invalid := tree("10", "1", 2)
	invalid.Status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: 1, Spec: tree("0", "5", 1).Spec}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{invalid}, pending)
	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a"}, names(kept)); diff != "" || len(refused) != 1 {
		t.Errorf("kept (-want +got):\n%s\nrefused %d; want the recorded max-5 generation in force", diff, len(refused))
	}
	invalid.Status.LastValid = nil
	p, _ = newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{invalid}, pending)
	if kept, _, _ := p.Process(context.Background(), &processors.LoopContext{}, pending); len(kept) != 2 {
		t.Errorf("kept %v; with no valid generation anywhere nothing is enforced", names(kept))
	}
}
