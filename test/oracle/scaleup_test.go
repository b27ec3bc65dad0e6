package oracle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const triggered = "pod triggered scale-up: [{pool 0->2 (max: 4)}]"

// triggers reports a scale-up for each of pods, as the autoscaler's
// TriggeredScaleUp events do.
func triggers(o *Oracle, pods ...*corev1.Pod) {
	for _, p := range pods {
		o.ScaleUpTriggered(p.UID, p.Name, triggered)
	}
}

func TestScaleUpForRefusedPods(t *testing.T) {
	tree := testTree("t", 0, 1, judgedValid, teams("cpu=16", "cpu=2", "cpu=6", "cpu=16"))
	raised := testTree("t", 0, 2, judgedValid, teams("cpu=16", "cpu=2", "cpu=16", "cpu=16"))
	ackGang := func(size string, n int, cpu string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 1; i <= n; i++ {
			out = append(out, ackMember("job", size, i, "", cpu))
		}
		return out
	}
	seeAll := func(o *Oracle, pods []*corev1.Pod) {
		for _, p := range pods {
			o.SetPod(p, false)
		}
	}
	for _, tc := range []struct {
		name   string
		steps  func(o *Oracle)
		want   []string
		judged int
	}{{
		name: "a pod asking more than its leaf's max",
		steps: func(o *Oracle) {
			big := testPod("ns-a", "big", "", "cpu=8")
			o.SetPod(big, false)
			triggers(o, big)
		},
		want:   []string{`pod ns-a/big triggered a scale-up (` + triggered + `), though kube-system/t@1 refuses it whatever else is charged: it requests cpu 8, over the max 6 of "a"`},
		judged: 1,
	}, {
		name: "a pod refused by what else its leaf holds is not judged",
		steps: func(o *Oracle) {
			o.SetPod(testPod("ns-a", "running", "n1", "cpu=5"), false)
			p := testPod("ns-a", "p", "", "cpu=2")
			o.SetPod(p, false)
			triggers(o, p)
		},
		judged: 1,
	}, {
		name: "a gang whose size is over its leaf's max",
		steps: func(o *Oracle) {
			members := ackGang("4", 4, "2")
			seeAll(o, members)
			triggers(o, members[0])
		},
		want:   []string{`pod ns-a/job-1 triggered a scale-up (` + triggered + `), though kube-system/t@1 refuses it whatever else is charged: gang labels ns-a/job's 4 smallest members request cpu 8, over the max 6 of "a"`},
		judged: 1,
	}, {
		name: "a PodGroup gang over its leaf's max",
		steps: func(o *Oracle) {
			o.SetPodGroup(podGroup("train", 4))
			var members []*corev1.Pod
			for i := 1; i <= 4; i++ {
				members = append(members, podGroupMember("train", i, ""))
			}
			seeAll(o, members)
			triggers(o, members[3])
		},
		want:   []string{`pod ns-a/train-4 triggered a scale-up (` + triggered + `), though kube-system/t@1 refuses it whatever else is charged: gang PodGroup ns-a/train's 4 smallest members request cpu 8, over the max 6 of "a"`},
		judged: 1,
	}, {
		name: "a gang that fits its leaf's max",
		steps: func(o *Oracle) {
			members := ackGang("3", 3, "2")
			seeAll(o, members)
			triggers(o, members...)
		},
		judged: 3,
	}, {
		name: "a gang member relabelled out of its gang may have been seen alone",
		steps: func(o *Oracle) {
			members := ackGang("4", 4, "2")
			seeAll(o, members)
			alone := members[0].DeepCopy()
			delete(alone.Labels, ackGangName)
			o.SetPod(alone, false)
			triggers(o, alone)
		},
		judged: 1,
	}, {
		name: "a gang member whose label removal is seen after the report",
		steps: func(o *Oracle) {
			members := ackGang("4", 4, "2")
			seeAll(o, members)
			triggers(o, members[0])
			alone := members[0].DeepCopy()
			delete(alone.Labels, ackGangName)
			o.SetPod(alone, false)
		},
		judged: 1,
	}, {
		name: "a gang member relabelled into a gang that fits may have been seen there",
		steps: func(o *Oracle) {
			members := ackGang("4", 4, "2")
			seeAll(o, members)
			moved := members[0].DeepCopy()
			moved.Labels[ackGangName], moved.Labels[ackMinAvailable] = "other", "1"
			o.SetPod(moved, false)
			triggers(o, moved)
		},
		judged: 1,
	}, {
		name: "a gang with fewer pods than its size is not judged",
		steps: func(o *Oracle) {
			members := ackGang("4", 2, "3")
			seeAll(o, members)
			triggers(o, members...)
		},
		judged: 2,
	}, {
		name: "a pod the tree admitted at some moment since it was seen is not judged",
		steps: func(o *Oracle) {
			big := testPod("ns-a", "big", "", "cpu=8")
			o.SetPod(big, false)
			o.SetTree(raised)
			o.SetTree(tree)
			triggers(o, big)
		},
		judged: 1,
	}, {
		name: "pods outside the tree, of another scheduler, or never seen are not judged",
		steps: func(o *Oracle) {
			outside := testPod("elsewhere", "big", "", "cpu=100")
			other := testPod("ns-a", "other", "", "cpu=8")
			other.Spec.SchedulerName = "plain-scheduler"
			o.SetPod(outside, false)
			o.SetPod(other, false)
			triggers(o, outside, other)
			o.ScaleUpTriggered(types.UID("unknown"), "unknown", triggered)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			o.SetTree(tree)
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if got := o.Counts().ScaleUpsJudged; got != tc.judged {
				t.Errorf("scale-ups judged: %d, want %d", got, tc.judged)
			}
		})
	}
}

func TestScaleUpBeforeAnyTree(t *testing.T) {
	o := New()
	big := testPod("ns-a", "big", "", "cpu=8")
	o.SetPod(big, false)
	o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=16", "cpu=2", "cpu=6", "cpu=16")))
	triggers(o, big)
	if got := o.Violations(noPreemptors); len(got) > 0 {
		t.Errorf("a pod seen before any tree was in force was judged: %v", got)
	}
}
