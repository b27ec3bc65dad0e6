package estimator

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"

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
			snapshot := simulator.NewSnapshot(nil, nil)
			fw.SetSnapshot(snapshot)
			res, err := Binpack(ctx, snapshot, pods, copies(tc.node), info, tc.limit, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := []int{res.NodeCount, len(res.Scheduled), len(res.Unscheduled)}
			want := []int{tc.wantNodes, len(pods) - tc.wantUnscheduled, tc.wantUnscheduled}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[nodes scheduled unscheduled] (-want +got):\n%s", diff)
			}
		})
	}
}

// copies makes the i-th new node from node, as the loop does.
func copies(node *corev1.Node) NewNode {
	return func(i int) (fwk.NodeInfo, []*resourcev1.ResourceSlice, error) {
		n := node.DeepCopy()
		n.Name = fmt.Sprintf("%s-new-%d", node.Name, i)
		n.Labels[corev1.LabelHostname] = n.Name
		info, err := simulator.NewNodeInfo(n)
		return info, nil, err
	}
}

// TestBinpackSeesPlacedPods: within one estimate, required anti-affinity and a
// hard topology spread constraint hold among the pods placed so far, as they
// do in upstream's estimator (one pod per new node here); and the snapshot is
// as it was afterwards.
func TestBinpackSeesPlacedPods(t *testing.T) {
	ctx := context.Background()
	labelled := func(name string) *corev1.Pod {
		p := pod(name, "1", "")
		p.Labels = map[string]string{"app": "web"}
		return p
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	antiAffinity := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selector, TopologyKey: corev1.LabelHostname}}}}
	}
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}
	}
	// A full node of the cluster is a hostname domain with no web pod: the
	// global minimum a spread constraint measures skew against.
	full := template(t, "1", "4Gi")
	full.Name, full.Labels[corev1.LabelHostname] = "full", "full"
	filler := pod("filler", "1", "")
	filler.Spec.NodeName = "full"
	for _, tc := range []struct {
		name      string
		mutate    func(*corev1.Pod)
		existing  []*corev1.Node
		wantNodes int
	}{
		{"required anti-affinity on kubernetes.io/hostname", antiAffinity, nil, 4},
		{"hostname spread, maxSkew 1, DoNotSchedule", spread, []*corev1.Node{full}, 4},
		// The real scheduler too puts them all on the only node there is.
		{"hostname spread with no other domain", spread, nil, 1},
		{"no constraint", func(*corev1.Pod) {}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newFramework(t)
			snapshot := simulator.NewSnapshot(tc.existing, []*corev1.Pod{filler})
			fw.SetSnapshot(snapshot)
			node := template(t, "8", "32Gi")
			info, err := simulator.NewNodeInfo(node)
			if err != nil {
				t.Fatal(err)
			}
			var pods []Pod
			var check *simulator.PodCheck
			for i := 0; i < 4; i++ {
				p := labelled(fmt.Sprintf("web-%d", i))
				tc.mutate(p)
				if check == nil {
					check = fw.PreFilter(ctx, p)
				}
				ep, err := NewPod(p, check, 0)
				if err != nil {
					t.Fatal(err)
				}
				pods = append(pods, ep)
			}
			before := snapshot.Len()
			for round := 0; round < 2; round++ { // the second estimate starts from the same state
				res, err := Binpack(ctx, snapshot, pods, copies(node), info, 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				if res.NodeCount != tc.wantNodes || len(res.Scheduled) != 4 {
					t.Errorf("round %d: %d nodes for %d pods, want %d nodes for 4", round, res.NodeCount, len(res.Scheduled), tc.wantNodes)
				}
				if snapshot.Len() != before {
					t.Errorf("round %d: the snapshot has %d nodes after the estimate, want %d", round, snapshot.Len(), before)
				}
			}
		})
	}
}

// TestBinpackPlacedAntiAffinityTurnsAwayOtherGroups: a pod without affinity
// terms of its own keeps off a node once a placed pod of another group has
// required anti-affinity against it, as the scheduler keeps it off: its
// PreFilter, which skipped inter-pod affinity, runs again after that placement.
func TestBinpackPlacedAntiAffinityTurnsAwayOtherGroups(t *testing.T) {
	ctx := context.Background()
	fw := newFramework(t)
	snapshot := simulator.NewSnapshot(nil, nil)
	fw.SetSnapshot(snapshot)
	// The larger pod is placed first and has anti-affinity against the web pod.
	db := pod("db", "2", "")
	db.Labels = map[string]string{"app": "db"}
	db.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	web := pod("web", "1", "")
	web.Labels = map[string]string{"app": "web"}
	var pods []Pod
	for i, p := range []*corev1.Pod{db, web} {
		ep, err := NewPod(p, fw.PreFilter(ctx, p), i)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, ep)
	}
	node := template(t, "8", "32Gi")
	info, err := simulator.NewNodeInfo(node)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Binpack(ctx, snapshot, pods, copies(node), info, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.NodeCount != 2 || len(res.Scheduled) != 2 {
		t.Errorf("%d nodes for %d pods, want 2 nodes for 2: web must not share db's node", res.NodeCount, len(res.Scheduled))
	}
}
