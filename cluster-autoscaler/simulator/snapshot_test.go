package simulator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"pgregory.net/rapid"
)

// view is what a snapshot shows: its nodes in order, each with the names of
// its pods.
type view struct {
	names []string
	pods  map[string][]string
}

func (v view) clone() view {
	c := view{names: slices.Clone(v.names), pods: map[string][]string{}}
	for n, p := range v.pods {
		c.pods[n] = slices.Clone(p)
	}
	return c
}

func viewOf(t *rapid.T, s *Snapshot) view {
	v := view{pods: map[string][]string{}}
	list, _ := s.List()
	for i, info := range list {
		name := info.Node().Name
		v.names = append(v.names, name)
		got, err := s.Get(name)
		if err != nil || got != s.At(i) {
			t.Fatalf("Get(%s) = %v, %v; want the node at position %d", name, got, err, i)
		}
		for _, p := range info.GetPods() {
			v.pods[name] = append(v.pods[name], p.GetPod().Name)
		}
	}
	return v
}

func testNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func testPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: node}}
}

// TestPropertySnapshotForkRevert drives a snapshot through random nested
// forks, placements, added nodes, commits and reverts, and holds it to a model
// that copies the whole view at every fork: each Revert must bring back
// exactly the view of its Fork (a Commit hands its changes to the fork
// before), and the cluster's own node infos never change.
func TestPropertySnapshotForkRevert(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := []*corev1.Node{testNode("a"), testNode("b"), testNode("c")}
		s := NewSnapshot(base, []*corev1.Pod{testPod("bound", "a")})
		baseInfos := slices.Clone(s.nodes)
		// The cluster's nodes come in the scheduler cache's order.
		want := view{pods: map[string][]string{"a": {"bound"}}}
		for _, info := range baseInfos {
			want.names = append(want.names, info.Node().Name)
		}
		var stack []view
		pods, added := 0, 0
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("op%d", step)); {
			case op == 4 && len(stack) > 0:
				s.Commit()
				stack = stack[:len(stack)-1]
			case op == 0:
				s.Fork()
				stack = append(stack, want.clone())
			case op == 1 && len(stack) > 0:
				s.Revert()
				want, stack = stack[len(stack)-1], stack[:len(stack)-1]
			case op == 2:
				name := fmt.Sprintf("new-%d", added)
				added++
				if err := s.AddNode(mustNodeInfo(t, testNode(name))); err != nil {
					t.Fatal(err)
				}
				want.names = append(want.names, name)
			default:
				i := rapid.IntRange(0, s.Len()-1).Draw(t, fmt.Sprintf("node%d", step))
				name := fmt.Sprintf("p%d", pods)
				pods++
				info, _ := framework.NewPodInfo(testPod(name, ""))
				s.Place(info, i)
				node := want.names[i]
				want.pods[node] = append(want.pods[node], name)
			}
			if diff := cmp.Diff(want, viewOf(t, s), cmp.AllowUnexported(view{})); diff != "" {
				t.Fatalf("snapshot after step %d differs from the model (-want +got):\n%s", step, diff)
			}
		}
		for _, info := range baseInfos {
			if n := len(info.GetPods()); n != map[string]int{"a": 1}[info.Node().Name] {
				t.Fatalf("the cluster's node info %s holds %d pods after the simulation", info.Node().Name, n)
			}
		}
	})
}

func mustNodeInfo(_ *rapid.T, n *corev1.Node) *framework.NodeInfo {
	info := framework.NewNodeInfo()
	info.SetNode(n)
	return info
}
