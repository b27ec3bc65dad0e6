package elasticquota

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

// TestGangsAreAdmittedWhole: a gang's pending pods are kept or refused
// together, for what the gang still needs (members bound hold their own
// quota), as the scheduler admits it; pods of no gang are judged one by one.
func TestGangsAreAdmittedWhole(t *testing.T) {
	// Pods of 5 cpu in a leaf of max leafMax.
	member := func(name, node string, minAvailable int) *corev1.Pod {
		p := pod(name, node, "", 1)
		p.Labels = map[string]string{gang.LabelName: "train", gang.LabelMinAvailable: fmt.Sprint(minAvailable)}
		return p
	}
	many := func(n, minAvailable int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			if minAvailable == 0 {
				out = append(out, pod(fmt.Sprintf("loose-%d", i), "", "", 1))
			} else {
				out = append(out, member(fmt.Sprintf("train-%d", i), "", minAvailable))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		leafMax     string
		bound       []*corev1.Pod
		pending     []*corev1.Pod
		wantKept    int
		wantRefused int
	}{
		{name: "a gang that fits whole is kept whole", leafMax: "20", pending: many(4, 4), wantKept: 4},
		{name: "a gang one pod over is refused whole", leafMax: "20", pending: many(5, 5), wantRefused: 5},
		{name: "pods of no gang are judged one by one", leafMax: "20", pending: many(5, 0), wantKept: 4, wantRefused: 1},
		{name: "bound members hold their own quota: 10 more do not fit 5 free", leafMax: "20",
			bound:   []*corev1.Pod{member("train-b0", "node", 4), member("train-b1", "node", 4), pod("other", "node", "", 1)},
			pending: many(2, 4), wantRefused: 2},
		{name: "bound members hold their own quota: 10 more fit 10 free", leafMax: "25",
			bound:   []*corev1.Pod{member("train-b0", "node", 4), member("train-b1", "node", 4), pod("other", "node", "", 1)},
			pending: many(2, 4), wantKept: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.pending {
				p.Status.Phase = corev1.PodPending
			}
			p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", tc.leafMax, 1)}, append(append([]*corev1.Pod(nil), tc.bound...), tc.pending...))
			kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, tc.pending)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int{tc.wantKept, tc.wantRefused}, []int{len(kept), len(refused)}); diff != "" {
				t.Errorf("[kept refused] (-want +got):\n%s", diff)
			}
			for _, r := range refused {
				want := `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`
				if r.Reason.Message != want {
					t.Errorf("pod %s refused for %q, want %q", r.Pod.Name, r.Reason.Message, want)
				}
				if _, inGang := gang.RefOf(r.Pod); inGang && (r.Gang == nil || r.Gang.Key.Name != "train") {
					t.Errorf("pod %s of gang train refused with gang %v", r.Pod.Name, r.Gang)
				}
			}
		})
	}
}

// TestGangMembersPastMinCountAreJudgedAlone: the tree admits a gang for its
// first MinCount members, together, and each member past them alone against
// the leaf, after the gang's charge. A member past MinCount the leaf refuses
// is refused as a pod, with the leaf's reason, so that no node is bought for
// it; while the gang itself is refused, so is every member.
func TestGangMembersPastMinCountAreJudgedAlone(t *testing.T) {
	const leafRefusal = `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`
	member := func(name, node, cpu string, created int64, minAvailable int) *corev1.Pod {
		p := pod(name, node, "", created)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		p.Labels = map[string]string{gang.LabelName: "train", gang.LabelMinAvailable: fmt.Sprint(minAvailable)}
		if node == "" {
			p.Status.Phase = corev1.PodPending
		}
		return p
	}
	gangOf := func(n int, cpu string, minAvailable int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, member(fmt.Sprintf("train-%d", i), "", cpu, int64(10+i), minAvailable))
		}
		return out
	}
	type refusal struct {
		Pod, Message string
		Gang         bool
	}
	refusals := func(gangRefused bool, pods ...string) []refusal {
		var out []refusal
		for _, p := range pods {
			out = append(out, refusal{Pod: p, Message: leafRefusal, Gang: gangRefused})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		leafMax     string
		bound       []*corev1.Pod
		pending     []*corev1.Pod
		wantKept    []string
		wantRefused []refusal
	}{
		{name: "ten of 3 cpu, min 2, in 6 cpu: the two the tree admits, eight refused by the leaf", leafMax: "6", pending: gangOf(10, "3", 2),
			wantKept:    []string{"train-0", "train-1"},
			wantRefused: refusals(false, "train-2", "train-3", "train-4", "train-5", "train-6", "train-7", "train-8", "train-9")},
		{name: "members past min that fit after the gang are kept", leafMax: "12", pending: gangOf(5, "3", 2),
			wantKept:    []string{"train-0", "train-1", "train-2", "train-3"},
			wantRefused: refusals(false, "train-4")},
		{name: "a gang the leaf refuses: every member refused as the gang", leafMax: "5", pending: gangOf(3, "3", 2),
			wantRefused: refusals(true, "train-0", "train-1", "train-2")},
		{name: "one member bound: one more is the gang, the rest alone", leafMax: "9",
			bound: []*corev1.Pod{member("train-b", "node", "3", 1, 2)}, pending: gangOf(3, "3", 2),
			wantKept: []string{"train-0", "train-1"}, wantRefused: refusals(false, "train-2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", tc.leafMax, 1)}, append(append([]*corev1.Pod(nil), tc.bound...), tc.pending...))
			kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, tc.pending)
			if err != nil {
				t.Fatal(err)
			}
			var got []refusal
			for _, r := range refused {
				got = append(got, refusal{Pod: r.Pod.Name, Message: r.Reason.Message, Gang: r.Gang != nil})
			}
			if diff := cmp.Diff(tc.wantKept, names(kept)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRefused, got); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
		})
	}
}
