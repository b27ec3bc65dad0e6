package estimator

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// gangPods are n pods of one equivalence group, as estimator Pods.
func gangPods(t *testing.T, fw *simulator.Framework, prefix string, n int, cpu string, group int, mutate func(*corev1.Pod)) []Pod {
	t.Helper()
	var out []Pod
	var check *simulator.PodCheck
	for i := 0; i < n; i++ {
		p := pod(fmt.Sprintf("%s-%d", prefix, i), cpu, "")
		if mutate != nil {
			mutate(p)
		}
		if check == nil {
			check = fw.PreFilter(context.Background(), p)
		}
		ep, err := NewPod(p, check, group)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ep)
	}
	return out
}

func TestBinpackGangs(t *testing.T) {
	ctx := context.Background()
	webAntiAffinity := func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	}
	// gangSpec is a gang's unit of n pods of cpu each, and past members of
	// the same size past it.
	type gangSpec struct {
		n      int
		cpu    string
		past   int
		mutate func(*corev1.Pod)
	}
	for _, tc := range []struct {
		name      string
		loose     int // 1-cpu pods of no gang
		gangs     []gangSpec
		limit     int
		wantNodes int
		// wantScheduled counts the pods placed, gangs' and others'.
		wantScheduled int
		wantGangs     []GangResult
	}{
		{name: "three of 3500m on 4-cpu nodes, two allowed: none", gangs: []gangSpec{{3, "3500m", 0, nil}}, limit: 2,
			wantGangs: []GangResult{{Nodes: 3}}},
		{name: "three of 3500m, three allowed: all", gangs: []gangSpec{{3, "3500m", 0, nil}}, limit: 3,
			wantNodes: 3, wantScheduled: 3, wantGangs: []GangResult{{Placed: true}}},
		{name: "pods of no gang first, as without gangs", loose: 2, gangs: []gangSpec{{3, "3500m", 0, nil}}, limit: 3,
			wantNodes: 1, wantScheduled: 2, wantGangs: []GangResult{{Nodes: 3}}},
		{name: "a gang fills the room the others left", loose: 2, gangs: []gangSpec{{2, "2", 0, nil}}, limit: 2,
			wantNodes: 2, wantScheduled: 4, wantGangs: []GangResult{{Placed: true}}},
		{name: "the unit must fit; the members past it are packed after it where they fit", gangs: []gangSpec{{2, "3500m", 2, nil}}, limit: 3,
			wantNodes: 3, wantScheduled: 3, wantGangs: []GangResult{{Placed: true}}},
		{name: "ten of 3 cpu, min 2: two nodes for the unit, none for the eight past it the limit leaves out", gangs: []gangSpec{{2, "3", 8, nil}},
			limit: 2, wantNodes: 2, wantScheduled: 2, wantGangs: []GangResult{{Placed: true}}},
		{name: "members past a unit left out get no node", gangs: []gangSpec{{3, "3500m", 2, nil}}, limit: 2,
			wantGangs: []GangResult{{Nodes: 3}}},
		{name: "the second gang gets what the first leaves", gangs: []gangSpec{{2, "3500m", 0, nil}, {2, "3500m", 0, nil}}, limit: 3,
			wantNodes: 2, wantScheduled: 2, wantGangs: []GangResult{{Placed: true}, {Nodes: 2}}},
		{
			// The first gang's trial placements are undone in every pod's
			// PreFilter state too: the second gang's anti-affinity would
			// otherwise count the first gang's pods on the new nodes.
			name: "a gang left out leaves no trace for the next", limit: 4,
			gangs:     []gangSpec{{5, "1", 0, webAntiAffinity}, {4, "1", 0, webAntiAffinity}},
			wantNodes: 4, wantScheduled: 4, wantGangs: []GangResult{{Nodes: 5}, {Placed: true}},
		},
		{name: "a pod larger than the node: no nodes, none needed", gangs: []gangSpec{{2, "8", 0, nil}}, limit: 10,
			wantGangs: []GangResult{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newFramework(t)
			snapshot := simulator.NewSnapshot(nil, nil)
			fw.SetSnapshot(snapshot)
			node := template(t, "4", "16Gi")
			info, err := simulator.NewNodeInfo(node)
			if err != nil {
				t.Fatal(err)
			}
			loose := gangPods(t, fw, "loose", tc.loose, "1", 0, nil)
			var gangs []Gang
			total := len(loose)
			for i, g := range tc.gangs {
				pods := gangPods(t, fw, fmt.Sprintf("gang%d", i), g.n, g.cpu, 2*i+1, g.mutate)
				past := gangPods(t, fw, fmt.Sprintf("gang%d-past", i), g.past, g.cpu, 2*i+2, g.mutate)
				gangs = append(gangs, Gang{Pods: pods, Past: past})
				total += g.n + g.past
			}
			for round := 0; round < 2; round++ { // the second estimate starts from the same state
				res, err := BinpackGangs(ctx, snapshot, loose, gangs, copies(node), info, tc.limit, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := []int{res.NodeCount, len(res.Scheduled), len(res.Unscheduled)}
				want := []int{tc.wantNodes, tc.wantScheduled, total - tc.wantScheduled}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("round %d: [nodes scheduled unscheduled] (-want +got):\n%s", round, diff)
				}
				if diff := cmp.Diff(tc.wantGangs, res.Gangs); diff != "" {
					t.Errorf("round %d: gangs (-want +got):\n%s", round, diff)
				}
				if snapshot.Len() != 0 {
					t.Errorf("round %d: %d nodes left in the snapshot", round, snapshot.Len())
				}
			}
		})
	}
}
