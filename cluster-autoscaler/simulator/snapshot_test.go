package simulator

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"pgregory.net/rapid"
)

// view is what a snapshot shows: its nodes in order, each with the names of
// its pods; the added nodes' slices, the claims it allocated (by key, the
// device) and its DRA stamp.
type view struct {
	names  []string
	pods   map[string][]string
	slices []string
	claims map[string]string
	stamp  uint64
}

func (v view) clone() view {
	c := view{names: slices.Clone(v.names), pods: map[string][]string{}, slices: slices.Clone(v.slices), claims: maps.Clone(v.claims), stamp: v.stamp}
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
	for _, sl := range s.dra.slices {
		v.slices = append(v.slices, sl.Name)
	}
	if len(s.dra.claims) > 0 {
		v.claims = map[string]string{}
	}
	for key, c := range s.dra.claims {
		v.claims[key] = c.Status.Allocation.Devices.Results[0].Device
	}
	v.stamp = s.DRAStamp()
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
// forks, placements, added nodes (some with devices), claim allocations,
// commits and reverts, and holds it to a model that copies the whole view at
// every fork: each Revert must bring back exactly the view of its Fork, DRA
// state and stamp included (a Commit hands its changes to the fork before),
// every DRA change must change the stamp, and the cluster's own node infos
// never change.
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
		want.stamp = s.DRAStamp()
		var stack []view
		pods, added, allocations := 0, 0, 0
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			before := want.stamp
			switch op := rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("op%d", step)); {
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
				// Every other added node has devices.
				var sl []*resourcev1.ResourceSlice
				if added%2 == 0 {
					sl = append(sl, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-slice"}})
					want.slices = append(want.slices, name+"-slice")
				}
				if err := s.AddNode(mustNodeInfo(t, testNode(name)), sl...); err != nil {
					t.Fatal(err)
				}
				want.names = append(want.names, name)
				if len(sl) > 0 {
					want.stamp = s.DRAStamp()
					if want.stamp == before {
						t.Fatalf("step %d: adding devices kept the DRA stamp", step)
					}
				}
			case op == 5:
				// A claim of three allocated, or allocated again.
				key := fmt.Sprintf("ns/claim-%d", rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("claim%d", step)))
				device := fmt.Sprintf("dev-%d", allocations)
				allocations++
				claim := &resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
					Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Device: device}}}}}}
				s.setClaim(key, claim)
				if want.claims == nil {
					want.claims = map[string]string{}
				}
				want.claims[key] = device
				want.stamp = s.DRAStamp()
				if want.stamp == before {
					t.Fatalf("step %d: allocating a claim kept the DRA stamp", step)
				}
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
