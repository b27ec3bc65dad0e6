package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	workloadv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/quota/gang"
)

func gangPodGroup(name string, minCount int32) *workloadv1beta1.PodGroup {
	return &workloadv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "namespace1"},
		Spec: workloadv1beta1.PodGroupSpec{SchedulingPolicy: workloadv1beta1.PodGroupSchedulingPolicy{
			Gang: &workloadv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

// gangPods are n pods of PodGroup group in namespace1 (root.a.1, max 20 cpu),
// each asking cpu, the first bound of them bound; the first is the oldest.
func gangPods(group string, n, bound int, cpu string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Namespace: "namespace1",
				UID: types.UID(fmt.Sprintf("%s-%d", group, i)), CreationTimestamp: ago(time.Duration(10-i) * time.Minute)},
			Spec: corev1.PodSpec{
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: list("cpu", cpu)}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		if i < bound {
			p.Spec.NodeName, p.Status.Phase = "node-1", corev1.PodRunning
		}
		out = append(out, p)
	}
	return out
}

func boundOf(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out
}

// TestExplainGang explains pods of gangs in seed 000's tree, whose leaf
// root.a.1 (namespace1) allows 20 cpu.
func TestExplainGang(t *testing.T) {
	tree := seedTree(t)
	acked := func(minAvailable string) *corev1.Pod {
		p := gangPods("ack", 1, 0, "1")[0]
		p.Spec.SchedulingGroup = nil
		p.Labels = map[string]string{gang.LabelName: "ack", gang.LabelMinAvailable: minAvailable}
		return p
	}
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		podGroup    *workloadv1beta1.PodGroup
		explain     *corev1.Pod // default: the first unbound of pods
		wantVerdict string
		wantGang    GangExplanation // Members left out
		wantCPU     string          // the request the path shows, "" for none
		wantAdmit   bool
	}{{
		name: "a gang of 4 x 6 cpu exceeds the leaf's 20: refused whole, stand-ins counted",
		pods: gangPods("train", 2, 0, "6"), podGroup: gangPodGroup("train", 4),
		wantVerdict: `Pending: gang namespace1/train of 4 pods is not admitted whole, so none of its pods is: refused by ElasticQuotaTree node "root.a.1" on cpu (used 0 + request 24 > max 20)`,
		wantGang: GangExplanation{Gang: "namespace1/train", Source: "PodGroup", MinCount: 4, Pods: 2,
			Request: map[string]string{"cpu": "24"}, StandIns: 2},
		wantCPU: "24",
	}, {
		name: "a bound member holds its own quota: the rest asks 18 on top of its 6",
		pods: gangPods("train", 4, 1, "6"), podGroup: gangPodGroup("train", 4),
		wantVerdict: `Pending: gang namespace1/train of 4 pods is not admitted whole, so none of its pods is: refused by ElasticQuotaTree node "root.a.1" on cpu (used 6 + request 18 > max 20)`,
		wantGang: GangExplanation{Gang: "namespace1/train", Source: "PodGroup", MinCount: 4, Pods: 4, Bound: 1,
			Request: map[string]string{"cpu": "18"}},
		wantCPU: "18",
	}, {
		name: "a gang that fits but has too few pods waits for them",
		pods: gangPods("train", 2, 0, "6"), podGroup: gangPodGroup("train", 3),
		wantVerdict: "Pending: gang namespace1/train has 2 of its 3 pods; the scheduler places none until all 3 exist",
		wantGang: GangExplanation{Gang: "namespace1/train", Source: "PodGroup", MinCount: 3, Pods: 2,
			Request: map[string]string{"cpu": "18"}, StandIns: 1},
		wantCPU: "18", wantAdmit: true,
	}, {
		name: "a whole gang's further pod is judged alone",
		pods: gangPods("train", 4, 3, "6"), podGroup: gangPodGroup("train", 3),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 18 + request 6 > max 20)`,
		wantGang:    GangExplanation{Gang: "namespace1/train", Source: "PodGroup", MinCount: 3, Pods: 4, Bound: 3, Whole: true},
		wantCPU:     "6",
	}, {
		name: "a missing PodGroup", pods: gangPods("gone", 1, 0, "1"),
		wantVerdict: "Pending: the gang cannot be read: pod namespace1/gone-0 names PodGroup namespace1/gone: PodGroup not found",
		wantGang: GangExplanation{Gang: "namespace1/gone", Source: "PodGroup",
			Problem: "pod namespace1/gone-0 names PodGroup namespace1/gone: PodGroup not found"},
		wantCPU: "1", wantAdmit: true,
	}, {
		name: "ACK labels with min-available 0", pods: []*corev1.Pod{acked("0")},
		wantVerdict: "Pending: the gang cannot be read: pod namespace1/ack-0 of gang namespace1/ack: invalid pod-group.scheduling.sigs.k8s.io/min-available: 0 is not positive",
		wantGang: GangExplanation{Gang: "namespace1/ack", Source: "Labels",
			Problem: "pod namespace1/ack-0 of gang namespace1/ack: invalid pod-group.scheduling.sigs.k8s.io/min-available: 0 is not positive"},
		wantCPU: "1", wantAdmit: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bound := boundOf(tc.pods)
			s := Snapshot{Now: now, Trees: treesOf(withStatus(t, tree, bound)), Pods: bound, GangPods: tc.pods, PodGroup: tc.podGroup}
			pod := tc.explain
			if pod == nil {
				for _, p := range tc.pods {
					if p.Spec.NodeName == "" {
						pod = p
						break
					}
				}
			}
			e := Explain(s, pod, DefaultTop)
			if e.Verdict != tc.wantVerdict {
				t.Errorf("verdict\n got %s\nwant %s", e.Verdict, tc.wantVerdict)
			}
			if e.Gang == nil {
				t.Fatal("no gang explained")
			}
			got := *e.Gang
			got.Members = nil
			if diff := cmp.Diff(tc.wantGang, got); diff != "" {
				t.Errorf("gang (-want +got):\n%s", diff)
			}
			eq := e.ElasticQuota
			if cpu := pathCPU(eq.Path)["root.a.1"].Request; cpu != tc.wantCPU || eq.Admitted != tc.wantAdmit {
				t.Errorf("root.a.1 judged cpu request %q admitted %v, want %q admitted %v", cpu, eq.Admitted, tc.wantCPU, tc.wantAdmit)
			}
			if wantGangRequest := !tc.wantGang.Whole && tc.wantGang.Problem == ""; eq.GangRequest != wantGangRequest {
				t.Errorf("GangRequest = %v, want %v", eq.GangRequest, wantGangRequest)
			}
		})
	}
}

func TestExplainGangMembersInGangOrder(t *testing.T) {
	pods := gangPods("train", 4, 0, "1")
	pods[3].Spec.NodeName, pods[3].Status.Phase = "node-1", corev1.PodRunning
	s := Snapshot{Now: now, GangPods: pods, PodGroup: gangPodGroup("train", 2)}
	e := Explain(s, pods[0], DefaultTop)
	want := []GangMember{
		{Pod: "train-3", Node: "node-1", Phase: corev1.PodRunning, Counted: true},
		{Pod: "train-0", Phase: corev1.PodPending, Counted: true},
		{Pod: "train-1", Phase: corev1.PodPending},
		{Pod: "train-2", Phase: corev1.PodPending},
	}
	if diff := cmp.Diff(want, e.Gang.Members); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	if got := PodGroupPod(s, "namespace1", "train"); got != pods[0] {
		t.Errorf("PodGroupPod = %v, want the first unbound pod train-0", got.Name)
	}
}

func TestExplainEmptyPodGroup(t *testing.T) {
	s := Snapshot{Now: now}
	if pod := PodGroupPod(s, "namespace1", "train"); pod != nil {
		t.Fatalf("PodGroupPod of a PodGroup without pods = %s", pod.Name)
	}
	e := ExplainEmptyPodGroup(s, gangPodGroup("train", 4))
	if want := "No pod of gang namespace1/train exists yet: it asks its quota for nothing until its pods are created, and the scheduler waits for 4 of them"; e.Verdict != want {
		t.Errorf("verdict\n got %s\nwant %s", e.Verdict, want)
	}
	bad := gangPodGroup("bad", 0)
	if e := ExplainEmptyPodGroup(s, bad); !strings.Contains(e.Verdict, "minCount 0 is not positive") || e.Gang.Problem == "" {
		t.Errorf("verdict on minCount 0: %s (problem %q)", e.Verdict, e.Gang.Problem)
	}
	var out bytes.Buffer
	if err := PrintExplain(&out, e, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Pod:") || !strings.Contains(out.String(), "GANG: namespace1/train (PodGroup), min count 4: 0 pod(s), 0 bound") {
		t.Errorf("printed:\n%s", out.String())
	}
}

func TestPrintExplainGang(t *testing.T) {
	pods := gangPods("train", 2, 0, "6")
	pg := gangPodGroup("train", 4)
	pg.Status.Conditions = []metav1.Condition{{Type: workloadv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
		Reason: workloadv1beta1.PodGroupReasonUnschedulable, Message: "gang namespace1/train of 4 pods does not fit its quota"}}
	tree := seedTree(t)
	e := Explain(Snapshot{Now: now, Trees: treesOf(withStatus(t, tree, nil)), GangPods: pods, PodGroup: pg}, pods[0], DefaultTop)
	var out bytes.Buffer
	if err := PrintExplain(&out, e, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GANG: namespace1/train (PodGroup), min count 4: 2 pod(s), 0 bound\n",
		"Asks its quota for cpu=24 (2 pod(s) not created yet counted with this pod's requests)\n",
		"PodGroupInitiallyScheduled=False (Unschedulable): gang namespace1/train of 4 pods does not fit its quota\n",
		"REQUEST is the whole gang's: the tree admits all of it or none\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
