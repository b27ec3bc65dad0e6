package core

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/processors/capacityquota"
	"github.com/quotascale/quotascale/processors/elasticquota"
	"github.com/quotascale/quotascale/quota/gang"
)

// statusRecorder keeps the last scale-up status of a loop.
type statusRecorder struct{ last *processors.ScaleUpStatus }

func (s *statusRecorder) Process(_ context.Context, _ *processors.LoopContext, st *processors.ScaleUpStatus) {
	s.last = st
}

// ackGang labels pod as a member of ACK gang name of minAvailable pods.
func ackGang(p *corev1.Pod, name string, minAvailable int) *corev1.Pod {
	p.Labels = map[string]string{gang.LabelName: name, gang.LabelMinAvailable: fmt.Sprint(minAvailable)}
	return p
}

func TestGangScaleUp(t *testing.T) {
	const quotaReason = `exceeded quota: "CapacityQuota/pool", resources: cpu`
	const leafReason = `exceeded elastic quota: "ElasticQuotaTree/root.ns", resources: cpu`
	pending := func(name string) *corev1.Pod { return testPod("ns", name, "job", "3500m", "") }
	gangOfCPU := func(n, minAvailable int, cpu string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			p := ackGang(testPod("ns", fmt.Sprintf("train-%d", i), "job", cpu, ""), "train", minAvailable)
			p.Spec.SchedulerName = treeScheduler
			out = append(out, p)
		}
		return out
	}
	gangOf := func(n, minAvailable int) []*corev1.Pod { return gangOfCPU(n, minAvailable, "3500m") }
	// A node of the group with 4 cpu free: room for one 3500m pod.
	free := node("node-free", "pool", "4", "16Gi")
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		nodes    []*corev1.Node
		quotaCPU string // "" is no quota
		// leafCPU is the max of the ElasticQuotaTree leaf of namespace
		// ns, whose processor judges the pods; "" is no tree.
		leafCPU string
		max     int
		// wantTarget is the group's target after the loop, from 0 (or the
		// nodes given); wantCalls how many IncreaseSize calls made it.
		wantTarget, wantCalls int
		// wantReason is a reason each pending pod's group gets, skipped or refused.
		wantReason string
	}{
		{name: "a gang of 3 under a quota for 2 nodes: no node", pods: gangOf(3, 3), quotaCPU: "8", max: 10, wantReason: quotaReason},
		{name: "the same gang under a quota for 3 nodes: 3 in one scale-up", pods: gangOf(3, 3), quotaCPU: "12", max: 10, wantTarget: 3, wantCalls: 1},
		{name: "the same pods in no gang: the 2 nodes the quota allows", pods: []*corev1.Pod{pending("a"), pending("b"), pending("c")},
			quotaCPU: "8", max: 10, wantTarget: 2, wantCalls: 1, wantReason: quotaReason},
		{name: "max size 2 for a gang of 3: no node", pods: gangOf(3, 3), max: 2, wantReason: "max node group size reached"},
		{name: "free room takes one, a new node the other", pods: gangOf(2, 2), nodes: []*corev1.Node{free}, quotaCPU: "8", max: 10,
			wantTarget: 2, wantCalls: 1},
		{name: "members beyond the minimum need not fit", pods: gangOf(4, 3), quotaCPU: "12", max: 10, wantTarget: 3, wantCalls: 1,
			wantReason: quotaReason},
		{name: "a gang short of pods: no node", pods: gangOf(3, 4), max: 10, wantReason: "gang ns/train has 3 of its 4 pods"},
		{name: "ten of 3 cpu, min 2, in a 6-cpu leaf: nodes for the two the tree admits", pods: gangOfCPU(10, 2, "3"), leafCPU: "6", max: 20,
			wantTarget: 2, wantCalls: 1, wantReason: leafReason},
		{name: "ten of 3 cpu, min 2, no tree: the members past min are pods like any other", pods: gangOfCPU(10, 2, "3"), max: 20,
			wantTarget: 10, wantCalls: 1},
		{name: "members past min get no node while the gang gets none", pods: gangOf(4, 3), quotaCPU: "8", max: 10, wantReason: quotaReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := &fakeGroup{id: "pool", max: tc.max, template: node("template-pool", "pool", "4", "16Gi")}
			f := &loopFixture{provider: &fakeProvider{groups: []*fakeGroup{group}}}
			nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, n := range tc.nodes {
				_ = nodeIdx.Add(n)
				group.instances = append(group.instances, instanceOf(n))
				group.target++
			}
			podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range tc.pods {
				_ = podIdx.Add(p)
			}
			f.nodes, f.pods = corelisters.NewNodeLister(nodeIdx), corelisters.NewPodLister(podIdx)
			var limiters []processors.ScaleUpLimiter
			if tc.quotaCPU != "" {
				limiters = append(limiters, cpuQuota(t, tc.quotaCPU))
			}
			a := newTestAutoscaler(t, f, limiters...)
			if tc.leafCPU != "" {
				a.PodListProcessors = append(a.PodListProcessors, treeProcessor(tc.leafCPU, f.pods))
			}
			rec := &statusRecorder{}
			a.StatusProcessors = []processors.ScaleUpStatusProcessor{rec}
			if err := a.RunOnce(context.Background(), time.Unix(1000, 0)); err != nil {
				t.Fatal(err)
			}
			got := []int{group.target, group.increased}
			if diff := cmp.Diff([]int{tc.wantTarget, tc.wantCalls}, got); diff != "" {
				t.Errorf("[target IncreaseSize calls] (-want +got):\n%s", diff)
			}
			if tc.wantReason != "" && !hasReason(rec.last, tc.wantReason) {
				t.Errorf("no pod group has the reason %q: %v", tc.wantReason, reasonsOf(rec.last))
			}
		})
	}
}

// treeScheduler enforces the ElasticQuotaTree of treeProcessor.
const treeScheduler = "quotascale-scheduler"

// treeProcessor judges the pods of treeScheduler against a tree whose one
// leaf, root.ns, holds namespace ns with a max of leafCPU.
func treeProcessor(leafCPU string, pods corelisters.PodLister) processors.PodListProcessor {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	tree := &schedulingv1beta1.ElasticQuotaTree{
		ObjectMeta: metav1.ObjectMeta{Name: "elasticquotatree", Namespace: "kube-system", UID: "tree", Generation: 1},
		Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: schedulingv1beta1.ElasticQuotaSpec{
			Name: "root", Min: cpu("100"), Max: cpu("100"),
			Children: []schedulingv1beta1.ElasticQuotaSpec{{Name: "root.ns", Namespaces: []string{"ns"}, Min: cpu("0"), Max: cpu(leafCPU)}},
		}},
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(tree)
	return elasticquota.New(store, pods, []string{treeScheduler})
}

func instanceOf(n *corev1.Node) cloudprovider.Instance {
	return cloudprovider.Instance{Id: n.Spec.ProviderID, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}}
}

// cpuQuota is a CapacityQuota named pool of cpu over every node. It sees no
// registered node: its usage is the nodes the loop adds.
func cpuQuota(t *testing.T, cpu string) processors.ScaleUpLimiter {
	t.Helper()
	quota := &autoscalingv1beta1.CapacityQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", ResourceVersion: "1"},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{
			Selector: &metav1.LabelSelector{},
			Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{"cpu": resource.MustParse(cpu)}},
		},
	}
	limiter, err := capacityquota.New(capacityquota.Options{Enabled: true},
		func() ([]*autoscalingv1beta1.CapacityQuota, error) {
			return []*autoscalingv1beta1.CapacityQuota{quota}, nil
		},
		nil, nil, capacityquota.NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	return limiter
}

// hasReason says whether a pod group of st was skipped, rejected or refused
// with a reason whose message contains want.
func hasReason(st *processors.ScaleUpStatus, want string) bool {
	if st == nil {
		return false
	}
	for _, info := range st.PodsRemainUnschedulable {
		for _, byGroup := range []map[string][]processors.Reason{info.Skipped, info.Rejected} {
			for _, reasons := range byGroup {
				for _, r := range reasons {
					if strings.Contains(r.Message, want) {
						return true
					}
				}
			}
		}
	}
	for _, r := range st.Refused {
		if strings.Contains(r.Reason.Message, want) {
			return true
		}
	}
	return false
}

// reasonsOf lists the messages of every reason in st, for failures.
func reasonsOf(st *processors.ScaleUpStatus) []string {
	var out []string
	if st == nil {
		return nil
	}
	for _, info := range st.PodsRemainUnschedulable {
		for id, reasons := range info.Skipped {
			for _, r := range reasons {
				out = append(out, "skipped by "+id+": "+r.Message)
			}
		}
		for id, reasons := range info.Rejected {
			for _, r := range reasons {
				out = append(out, "rejected by "+id+": "+r.Message)
			}
		}
	}
	for _, r := range st.Refused {
		out = append(out, "refused: "+r.Reason.Message)
	}
	return out
}
