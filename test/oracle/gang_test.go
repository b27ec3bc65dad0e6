package oracle

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sscheduling "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// ackMember is pod i of an ACK gang of ns-a, bound to node unless it is "".
func ackMember(gang, size string, i int, node, cpu string) *corev1.Pod {
	p := testPod("ns-a", fmt.Sprintf("%s-%d", gang, i), node, "cpu="+cpu)
	p.Labels = map[string]string{ackGangName: gang, ackMinAvailable: size}
	return p
}

func podGroupMember(group string, i int, node string) *corev1.Pod {
	p := testPod("ns-a", fmt.Sprintf("%s-%d", group, i), node, "cpu=2")
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
	return p
}

func podGroup(name string, minCount int32) *k8sscheduling.PodGroup {
	pg := &k8sscheduling.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: name}}
	pg.Spec.SchedulingPolicy.Gang = &k8sscheduling.GangSchedulingPolicy{MinCount: minCount}
	return pg
}

// withStatus is tree t with the scheduler's figures for quota node a.
func withStatus(t *schedulingv1beta1.ElasticQuotaTree, aUsed ...string) *schedulingv1beta1.ElasticQuotaTree {
	t = t.DeepCopy()
	t.Status.Quotas = []schedulingv1beta1.QuotaNodeStatus{{Name: "a", Parent: "root", Used: resourceList(aUsed...)}}
	return t
}

// blockedGang adds an ACK gang of ns-a whose 4 pods of 2 cpu are over leaf
// a's max of 6 cpu: it may hold nothing.
func blockedGang(o *Oracle) {
	for i := 1; i <= 4; i++ {
		o.SetPod(ackMember("job", "4", i, "", "2"), false)
	}
}

func TestGangPartlyBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
		whole int
	}{{
		name: "an ACK gang bound whole",
		steps: func(o *Oracle) {
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "n1", "1"), false)
			}
		},
		whole: 1,
	}, {
		name: "an ACK gang left with two of three bound",
		steps: func(o *Oracle) {
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			o.SetPod(ackMember("job", "3", 1, "n1", "1"), false)
			o.SetPod(ackMember("job", "3", 2, "n1", "1"), false)
		},
		want: []string{"gang labels ns-a/job: 2 of its 3 pods bound, and never all of them"},
	}, {
		name: "a whole gang that later lost a pod was not partly bound by the scheduler",
		steps: func(o *Oracle) {
			for i := 1; i <= 2; i++ {
				o.SetPod(ackMember("job", "2", i, "n1", "1"), false)
			}
			o.DeletePod(ackMember("job", "2", 2, "n1", "1"))
		},
		whole: 1,
	}, {
		name: "a PodGroup gang partly bound",
		steps: func(o *Oracle) {
			o.SetPodGroup(podGroup("train", 4))
			for i := 1; i <= 4; i++ {
				o.SetPod(podGroupMember("train", i, ""), false)
			}
			o.SetPod(podGroupMember("train", 1, "n1"), false)
		},
		want: []string{"gang PodGroup ns-a/train: 1 of its 4 pods bound, and never all of them"},
	}, {
		name: "a member relabelled out while the gang waited, then bound with it",
		steps: func(o *Oracle) {
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			moved := ackMember("job", "3", 3, "", "1")
			moved.Labels[ackGangName] = "elsewhere"
			o.SetPod(moved, false)
			for i := 1; i <= 2; i++ {
				o.SetPod(ackMember("job", "3", i, "n1", "1"), false)
			}
			moved = moved.DeepCopy()
			moved.Spec.NodeName = "n1"
			o.SetPod(moved, false)
		},
	}, {
		name: "a gang bound short of the member relabelled out of it",
		steps: func(o *Oracle) {
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			alone := ackMember("job", "3", 3, "", "1")
			delete(alone.Labels, ackGangName)
			o.SetPod(alone, false)
			for i := 1; i <= 2; i++ {
				o.SetPod(ackMember("job", "3", i, "n1", "1"), false)
			}
		},
		want: []string{"gang labels ns-a/job: 2 of its 3 pods bound, and never all of them"},
	}, {
		name: "pods of a PodGroup the oracle never saw, or with bad labels, are no gang",
		steps: func(o *Oracle) {
			o.SetPod(podGroupMember("unknown", 1, "n1"), false)
			o.SetPod(ackMember("bad", "zero", 1, "n1", "1"), false)
			o.SetPod(ackMember("bad", "zero", 2, "", "1"), false)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if got := o.Counts().GangsWhole; got != tc.whole {
				t.Errorf("gangs seen whole: %d, want %d", got, tc.whole)
			}
		})
	}
}

func TestGangHoldsNothing(t *testing.T) {
	tree := testTree("t", 0, 1, judgedValid, teams("cpu=16", "cpu=2", "cpu=6", "cpu=16"))
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
	}{{
		name: "a gang over its leaf's max holds nothing",
		steps: func(o *Oracle) {
			for i := 1; i <= 4; i++ {
				o.SetPod(ackMember("job", "4", i, "", "2"), false)
			}
			o.SetTree(withStatus(tree, "cpu=0"))
		},
	}, {
		name: "a gang over its leaf's max shown holding quota",
		steps: func(o *Oracle) {
			for i := 1; i <= 4; i++ {
				o.SetPod(ackMember("job", "4", i, "", "2"), false)
			}
			o.SetTree(withStatus(tree, "cpu=6"))
		},
		want: []string{`quota node "a" of kube-system/t@1: status shows cpu 6 used, 6 of it for no bound or admissible pending pod, while [gang labels ns-a/job (its 4 pods request cpu 8, over the max 6 of "a")] may hold nothing`},
	}, {
		name: "a gang with fewer pods than its size shown holding quota",
		steps: func(o *Oracle) {
			for i := 1; i <= 2; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			o.SetTree(withStatus(tree, "cpu=2"))
		},
		want: []string{`quota node "a" of kube-system/t@1: status shows cpu 2 used, 2 of it for no bound or admissible pending pod, while [gang labels ns-a/job (2 of its 3 pods exist)] may hold nothing`},
	}, {
		name: "an admissible gang's reservation, a pod just released and bound pods explain the rest",
		steps: func(o *Oracle) {
			for i := 1; i <= 4; i++ {
				o.SetPod(ackMember("never", "4", i, "", "2"), false)
			}
			for i := 1; i <= 2; i++ {
				o.SetPod(ackMember("small", "2", i, "", "1"), false)
			}
			o.SetPod(testPod("ns-a", "running", "n1", "cpu=1"), false)
			o.SetPod(testPod("ns-a", "gone", "n1", "cpu=1"), false)
			o.DeletePod(testPod("ns-a", "gone", "n1", "cpu=1"))
			// 1 running + 2 reserved for small + 1 the status has not dropped yet.
			o.SetTree(withStatus(tree, "cpu=4"))
		},
	}, {
		name: "a gang a member left since the last write may still show its reservation, not at the next write",
		steps: func(o *Oracle) {
			for i := 1; i <= 3; i++ {
				o.SetPod(ackMember("job", "3", i, "", "1"), false)
			}
			o.SetTree(withStatus(tree, "cpu=3"))
			moved := ackMember("job", "3", 3, "", "1")
			moved.Labels[ackGangName] = "elsewhere"
			o.SetPod(moved, false)
			o.SetTree(withStatus(tree, "cpu=3"))
			o.SetTree(withStatus(tree, "cpu=3"))
		},
		want: []string{`quota node "a" of kube-system/t@1: status shows cpu 3 used, 3 of it for no bound or admissible pending pod, while [gang labels ns-a/elsewhere (1 of its 3 pods exist) gang labels ns-a/job (2 of its 3 pods exist)] may hold nothing`},
	}, {
		name: "devices no pod or claim explains, while a gang may hold nothing",
		steps: func(o *Oracle) {
			blockedGang(o)
			o.SetTree(withStatus(tree, gpus+"=2"))
		},
		want: []string{`quota node "a" of kube-system/t@1: status shows ` + gpus + ` 2 used, 2 of it for no bound or admissible pending pod, while [gang labels ns-a/job (its 4 pods request cpu 8, over the max 6 of "a")] may hold nothing`},
	}, {
		name: "a pending pod's claim not allocated yet explains the devices it is charged",
		steps: func(o *Oracle) {
			blockedGang(o)
			claim := allocatedClaim("ns-a", "two", 2)
			claim.Status.Allocation = nil
			o.SetResourceClaim(claim)
			o.SetPod(usingClaim(testPod("ns-a", "binding", "", "cpu=1"), "two"), false)
			o.SetTree(withStatus(tree, "cpu=1", gpus+"=2"))
		},
	}, {
		name: "a deleted claim's devices explain the status until its next write",
		steps: func(o *Oracle) {
			blockedGang(o)
			o.SetResourceClaim(allocatedClaim("ns-a", "two", 2))
			o.SetPod(usingClaim(testPod("ns-a", "user", "n1", "cpu=1"), "two"), false)
			o.DeletePod(usingClaim(testPod("ns-a", "user", "n1", "cpu=1"), "two"))
			o.DeleteResourceClaim("ns-a", "two")
			o.SetTree(withStatus(tree, "cpu=1", gpus+"=2"))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			o.SetTree(tree)
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
