package scaledown

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// destinations are the nodes pods may move to, with the pods already moved
// there in this loop; nodes are cloned only when a pod lands on them.
type destinations struct {
	infos    []fwk.NodeInfo
	cloned   []bool
	excluded []bool
	placed   map[*corev1.Pod]int
	moved    map[*corev1.Pod]*corev1.Pod
}

func newDestinations(infos []fwk.NodeInfo) *destinations {
	return &destinations{
		infos: append([]fwk.NodeInfo(nil), infos...), cloned: make([]bool, len(infos)),
		excluded: make([]bool, len(infos)), placed: map[*corev1.Pod]int{}, moved: map[*corev1.Pod]*corev1.Pod{},
	}
}

func (d *destinations) exclude(i int) { d.excluded[i] = true }
func (d *destinations) include(i int) { d.excluded[i] = false }

// place finds a node for every pod, all or none.
func (d *destinations) place(ctx context.Context, fw *simulator.Framework, pods []*corev1.Pod) bool {
	for _, pod := range pods {
		// The pod as it would be recreated: not bound. NodeName would pin it.
		moved := pod.DeepCopy()
		moved.Spec.NodeName = ""
		check := fw.PreFilter(ctx, moved)
		info, err := framework.NewPodInfo(moved)
		if err != nil {
			d.unplace(pods)
			return false
		}
		ok := false
		for i := range d.infos {
			if d.excluded[i] {
				continue
			}
			if st := check.Fits(ctx, d.infos[i]); !st.IsSuccess() {
				klog.FromContext(ctx).V(5).Info("Pod does not fit", "pod", klog.KObj(pod), "node", d.infos[i].Node().Name, "reason", st.Message())
				continue
			}
			if !d.cloned[i] {
				d.infos[i] = d.infos[i].Snapshot()
				d.cloned[i] = true
			}
			d.infos[i].AddPodInfo(info)
			d.placed[pod] = i
			d.moved[pod] = moved
			ok = true
			break
		}
		if !ok {
			d.unplace(pods)
			return false
		}
	}
	return true
}

// unplace takes back the simulated moves of pods.
func (d *destinations) unplace(pods []*corev1.Pod) {
	for _, pod := range pods {
		i, ok := d.placed[pod]
		if !ok {
			continue
		}
		_ = d.infos[i].RemovePod(klog.Background(), d.moved[pod])
		delete(d.placed, pod)
		delete(d.moved, pod)
	}
}
