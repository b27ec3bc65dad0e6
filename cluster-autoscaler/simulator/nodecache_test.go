package simulator

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestNodeInfoCacheMatchesNewSnapshot: over random sequences of node and pod
// additions, removals, replacements and moves (informers hand out a new
// object on every change), the cache's snapshot holds, node for node, the
// same node object, the same pod objects and the same requested resources as
// a snapshot built afresh, and sees the same claims in use. Fails when a
// node whose pod was replaced, removed or moved keeps its old NodeInfo.
func TestNodeInfoCacheMatchesNewSnapshot(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := NewNodeInfoCache()
		nodes := map[string]*corev1.Node{}
		pods := map[string]*corev1.Pod{}
		newNode := func(name string) *corev1.Node {
			cpu := resource.MustParse(fmt.Sprint(4 + rng.IntN(4)))
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: cpu}}}
		}
		newPod := func(name, node string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+rng.IntN(400)))}}}}}}
			if rng.IntN(4) == 0 {
				p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + name}}}}
			}
			return p
		}
		for i := 0; i < 6; i++ {
			nodes[fmt.Sprintf("n%d", i)] = newNode(fmt.Sprintf("n%d", i))
		}
		for step := 0; step < 60; step++ {
			// One change, sometimes none.
			node := fmt.Sprintf("n%d", rng.IntN(8))
			name := fmt.Sprintf("p%d", rng.IntN(30))
			switch rng.IntN(7) {
			case 0:
				nodes[node] = newNode(node)
			case 1:
				delete(nodes, node)
			case 2, 3:
				pods[name] = newPod(name, node)
			case 4:
				delete(pods, name)
			case 5:
				if p, ok := pods[name]; ok {
					// The same pod, a new object (a status update).
					cp := p.DeepCopy()
					pods[name] = cp
				}
			}
			nodeList := make([]*corev1.Node, 0, len(nodes))
			for _, n := range nodes {
				nodeList = append(nodeList, n)
			}
			podList := make([]*corev1.Pod, 0, len(pods))
			for _, p := range pods {
				podList = append(podList, p)
			}
			rng.Shuffle(len(podList), func(i, j int) { podList[i], podList[j] = podList[j], podList[i] })
			got, want := c.Snapshot(nodeList, podList), NewSnapshot(nodeList, podList)
			if diff := compareSnapshots(got, want); diff != "" {
				t.Fatalf("seed %d step %d: %s", seed, step, diff)
			}
			for _, p := range podList {
				key := "ns/claim-" + p.Name
				if g, w := got.base.StorageInfos().IsPVCUsedByPods(key), want.base.StorageInfos().IsPVCUsedByPods(key); g != w {
					t.Fatalf("seed %d step %d: claim %s in use: %v, afresh %v", seed, step, key, g, w)
				}
			}
		}
	}
}

func compareSnapshots(got, want *Snapshot) string {
	if got.Len() != want.Len() {
		return fmt.Sprintf("%d nodes, afresh %d", got.Len(), want.Len())
	}
	for i := 0; i < want.Len(); i++ {
		w := want.At(i)
		g, err := got.Get(w.Node().Name)
		if err != nil {
			return err.Error()
		}
		if g.Node() != w.Node() {
			return fmt.Sprintf("node %s: another node object", w.Node().Name)
		}
		var gp, wp []string
		for _, p := range g.GetPods() {
			gp = append(gp, fmt.Sprintf("%p", p.GetPod()))
		}
		for _, p := range w.GetPods() {
			wp = append(wp, fmt.Sprintf("%p", p.GetPod()))
		}
		sort.Strings(gp)
		sort.Strings(wp)
		if fmt.Sprint(gp) != fmt.Sprint(wp) {
			return fmt.Sprintf("node %s: pods %v, afresh %v", w.Node().Name, gp, wp)
		}
		if g.GetRequested().GetMilliCPU() != w.GetRequested().GetMilliCPU() || len(g.GetPVCRefCounts()) != len(w.GetPVCRefCounts()) {
			return fmt.Sprintf("node %s: requested %d, afresh %d", w.Node().Name, g.GetRequested().GetMilliCPU(), w.GetRequested().GetMilliCPU())
		}
	}
	return ""
}
