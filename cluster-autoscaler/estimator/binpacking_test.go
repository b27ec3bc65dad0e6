package estimator

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

func newFramework(t *testing.T) *simulator.Framework {
	t.Helper()
	cfg, err := simulator.DefaultSchedulerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	fw, err := simulator.NewFramework(t.Context(), simulator.FrameworkOptions{
		Config: cfg, Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	fw.SetSnapshot(simulator.NewSnapshot(nil, nil))
	return fw
}

func pod(name, cpu, memory string) *corev1.Pod {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}}},
	}
}

func template(t *testing.T, cpu, memory string) *corev1.Node {
	t.Helper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "template", Labels: map[string]string{corev1.LabelHostname: "template"}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

func TestBinpack(t *testing.T) {
	fw := newFramework(t)
	ctx := context.Background()
	many := func(prefix string, n int, cpu, memory string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory))
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		groups          [][]*corev1.Pod
		node            *corev1.Node
		limit           int
		wantNodes       int
		wantUnscheduled int
	}{
		{name: "twelve 1-cpu pods on 4-cpu nodes", groups: [][]*corev1.Pod{many("a", 12, "1", "")}, node: template(t, "4", "16Gi"), limit: 10, wantNodes: 3},
		{name: "the limit leaves pods out", groups: [][]*corev1.Pod{many("a", 12, "1", "")}, node: template(t, "4", "16Gi"), limit: 2, wantNodes: 2, wantUnscheduled: 4},
		{name: "memory binds before cpu", groups: [][]*corev1.Pod{many("a", 4, "100m", "6Gi")}, node: template(t, "4", "16Gi"), limit: 10, wantNodes: 2},
		{
			// First-fit decreasing: the 3-cpu pods open nodes, the 1-cpu pods fill them.
			name:   "large pods first, small ones fill the gaps",
			groups: [][]*corev1.Pod{many("small", 3, "1", ""), many("large", 3, "3", "")},
			node:   template(t, "4", "16Gi"), limit: 10, wantNodes: 3,
		},
		{name: "a pod larger than the node fits nowhere", groups: [][]*corev1.Pod{many("huge", 1, "8", "")}, node: template(t, "4", "16Gi"), limit: 10, wantNodes: 0, wantUnscheduled: 1},
		{name: "no pods, no nodes", node: template(t, "4", "16Gi"), limit: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := simulator.NewNodeInfo(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			var pods []Pod
			for g, group := range tc.groups {
				check := fw.PreFilter(ctx, group[0])
				for _, p := range group {
					ep, err := NewPod(p, check, g)
					if err != nil {
						t.Fatal(err)
					}
					pods = append(pods, ep)
				}
			}
			res := Binpack(ctx, pods, info, tc.limit, 0)
			got := []int{res.NodeCount, len(res.Scheduled), len(res.Unscheduled)}
			want := []int{tc.wantNodes, len(pods) - tc.wantUnscheduled, tc.wantUnscheduled}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[nodes scheduled unscheduled] (-want +got):\n%s", diff)
			}
		})
	}
}
