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

// TestGangAdmission: the tree admits a gang for its first MinCount members,
// together, for what they still need (members bound hold their own quota);
// each member past them is judged alone against the leaf, after the gang's
// charge, and pods of no gang one by one. A member past MinCount the leaf
// refuses is refused as a pod, with the leaf's reason, so that no node is
// bought for it; while the gang itself is refused, so is every member.
func TestGangAdmission(t *testing.T) {
	const leafRefusal = `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`
	member := func(name, node, cpu string, created int64, minAvailable int) *corev1.Pod {
		p := pod(name, node, "", created)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		p.Labels = map[string]string{gang.LabelName: "train", gang.LabelMinAvailable: fmt.Sprint(minAvailable)}
		return p
	}
	// gangOf is n pending members of cpu each, created in name order; with
	// minAvailable 0, n pods of no gang.
	gangOf := func(n int, cpu string, minAvailable int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			p := member(fmt.Sprintf("train-%d", i), "", cpu, int64(10+i), minAvailable)
			if minAvailable == 0 {
				p.Name, p.UID, p.Labels = fmt.Sprintf("loose-%d", i), p.UID+"-loose", nil
			}
			out = append(out, p)
		}
		return out
	}
	bound := []*corev1.Pod{member("train-b0", "node", "5", 1, 4), member("train-b1", "node", "5", 1, 4), pod("other", "node", "", 1)}
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
		{name: "a gang that fits whole is kept whole", leafMax: "20", pending: gangOf(4, "5", 4),
			wantKept: []string{"train-0", "train-1", "train-2", "train-3"}},
		{name: "a gang one pod over is refused whole", leafMax: "20", pending: gangOf(5, "5", 5),
			wantRefused: refusals(true, "train-0", "train-1", "train-2", "train-3", "train-4")},
		{name: "pods of no gang are judged one by one", leafMax: "20", pending: gangOf(5, "5", 0),
			wantKept: []string{"loose-0", "loose-1", "loose-2", "loose-3"}, wantRefused: refusals(false, "loose-4")},
		{name: "bound members hold their own quota: 10 more do not fit 5 free", leafMax: "20", bound: bound, pending: gangOf(2, "5", 4),
			wantRefused: refusals(true, "train-0", "train-1")},
		{name: "bound members hold their own quota: 10 more fit 10 free", leafMax: "25", bound: bound, pending: gangOf(2, "5", 4),
			wantKept: []string{"train-0", "train-1"}},
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
			for _, p := range tc.pending {
				p.Status.Phase = corev1.PodPending
			}
			p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tree("0", tc.leafMax, 1)}, append(append([]*corev1.Pod(nil), tc.bound...), tc.pending...))
			kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, tc.pending)
			if err != nil {
				t.Fatal(err)
			}
			var got []refusal
			for _, r := range refused {
				got = append(got, refusal{Pod: r.Pod.Name, Message: r.Reason.Message, Gang: r.Gang != nil})
				if r.Gang != nil && r.Gang.Key.Name != "train" {
					t.Errorf("pod %s refused as gang %s, want train", r.Pod.Name, r.Gang.Key)
				}
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
