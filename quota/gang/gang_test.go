package gang

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/claims"
)

func podGroup(name string, minCount int32) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
	if minCount >= 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	}
	return pg
}

func lookup(groups ...*schedulingv1beta1.PodGroup) func(string, string) (*schedulingv1beta1.PodGroup, bool) {
	return func(ns, name string) (*schedulingv1beta1.PodGroup, bool) {
		for _, g := range groups {
			if g.Namespace == ns && g.Name == name {
				return g, true
			}
		}
		return nil, false
	}
}

type podOpt func(*corev1.Pod)

func inPodGroup(name string) podOpt {
	return func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name} }
}

func labelled(name, minAvailable string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{LabelName: name}
		if minAvailable != "" {
			p.Labels[LabelMinAvailable] = minAvailable
		}
	}
}

func newPod(name, cpu string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestOf(t *testing.T) {
	groups := lookup(podGroup("train", 4), podGroup("basic", -1), podGroup("zero", 0))
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		want     Gang
		wantGang bool
		wantErr  error
	}{
		{name: "no gang", pod: newPod("p", "1")},
		{name: "PodGroup gang", pod: newPod("p", "1", inPodGroup("train")),
			want: Gang{Key: Key{Kind: KindPodGroup, Namespace: "team-a", Name: "train"}, MinCount: 4}, wantGang: true},
		{name: "PodGroup with the basic policy is no gang", pod: newPod("p", "1", inPodGroup("basic"))},
		{name: "missing PodGroup", pod: newPod("p", "1", inPodGroup("gone")), wantErr: ErrPodGroupNotFound},
		{name: "PodGroup with minCount 0", pod: newPod("p", "1", inPodGroup("zero")), wantErr: errAny},
		{name: "ACK labels", pod: newPod("p", "1", labelled("job", "3")),
			want: Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: 3}, wantGang: true},
		{name: "ACK min-available missing", pod: newPod("p", "1", labelled("job", "")), wantErr: ErrInvalidMinAvailable},
		{name: "ACK min-available zero", pod: newPod("p", "1", labelled("job", "0")), wantErr: ErrInvalidMinAvailable},
		{name: "ACK min-available negative", pod: newPod("p", "1", labelled("job", "-2")), wantErr: ErrInvalidMinAvailable},
		{name: "ACK min-available not a number", pod: newPod("p", "1", labelled("job", "three")), wantErr: ErrInvalidMinAvailable},
		{name: "ACK min-available past int32", pod: newPod("p", "1", labelled("job", "3000000000")), wantErr: ErrInvalidMinAvailable},
		{name: "the PodGroup wins over ACK labels", pod: newPod("p", "1", labelled("job", "3"), inPodGroup("train")),
			want: Gang{Key: Key{Kind: KindPodGroup, Namespace: "team-a", Name: "train"}, MinCount: 4}, wantGang: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, isGang, err := Of(tc.pod, groups)
			switch {
			case tc.wantErr == errAny && err == nil, tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || isGang != tc.wantGang {
				t.Errorf("Of() = %v (gang %v), want %v (gang %v); diff (-want +got):\n%s", got, isGang, tc.want, tc.wantGang, diff)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestOfWithoutTheWorkloadAPI(t *testing.T) {
	if _, _, err := Of(newPod("p", "1", inPodGroup("train")), nil); !errors.Is(err, ErrPodGroupNotFound) {
		t.Fatalf("Of with no PodGroup lookup = %v, want ErrPodGroupNotFound", err)
	}
}

func TestMembersOrderAndLiveness(t *testing.T) {
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(p *corev1.Pod, minute int) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))
		return p
	}
	bound := at(newPod("z-bound", "1", inPodGroup("train")), 9)
	bound.Spec.NodeName = "node-1"
	finished := at(newPod("finished", "1", inPodGroup("train")), 0)
	finished.Status.Phase = corev1.PodSucceeded
	deleting := at(newPod("deleting", "1", inPodGroup("train")), 0)
	deleting.DeletionTimestamp = &metav1.Time{Time: base}
	pods := []*corev1.Pod{
		at(newPod("b", "1", inPodGroup("train")), 1),
		at(newPod("a", "1", inPodGroup("train")), 1),
		at(newPod("early", "1", inPodGroup("train")), 0),
		bound, finished, deleting,
		at(newPod("other-gang", "1", inPodGroup("other")), 0),
		at(newPod("same-name-labels", "1", labelled("train", "2")), 0),
	}
	var names []string
	for _, p := range Members(Key{Kind: KindPodGroup, Namespace: "team-a", Name: "train"}, pods) {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"z-bound", "early", "a", "b"}, names); diff != "" {
		t.Errorf("Members (-want +got):\n%s", diff)
	}
}

func TestRequest(t *testing.T) {
	g := Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: 4}
	for _, tc := range []struct {
		name         string
		members      []*corev1.Pod
		pod          *corev1.Pod
		wantCPU      string
		wantStandIns int
	}{
		{name: "no member exists yet", pod: newPod("p", "2"), wantCPU: "8", wantStandIns: 4},
		{name: "two members exist", members: []*corev1.Pod{newPod("a", "1"), newPod("b", "500m")},
			pod: newPod("p", "2"), wantCPU: "5500m", wantStandIns: 2},
		{name: "more members than minCount: the first four",
			members: []*corev1.Pod{newPod("a", "1"), newPod("b", "1"), newPod("c", "1"), newPod("d", "1"), newPod("e", "9")},
			pod:     newPod("e", "9"), wantCPU: "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, standIns := Request(g, tc.members, tc.pod, Charger{})
			want := resource.MustParse(tc.wantCPU)
			if cpu := got[corev1.ResourceCPU]; cpu.Cmp(want) != 0 || standIns != tc.wantStandIns {
				t.Errorf("Request = cpu %s, %d stand-ins; want %s, %d", cpu.String(), standIns, tc.wantCPU, tc.wantStandIns)
			}
		})
	}
}

func TestRequestOfAHugeGangSaturates(t *testing.T) {
	g := Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: 2_000_000_000}
	got, standIns := Request(g, nil, newPod("p", "8"), Charger{})
	cpu := got[corev1.ResourceCPU]
	if standIns != 2_000_000_000 || cpu.Cmp(resource.MustParse("16e9")) != 0 {
		t.Errorf("Request = cpu %s, %d stand-ins; want 16e9 cpu and 2e9 stand-ins", cpu.String(), standIns)
	}
}

func TestOutstanding(t *testing.T) {
	g := Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: 3}
	bound := func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = "node-1"; return p }
	isBound := func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }
	for _, tc := range []struct {
		name         string
		members      []*corev1.Pod
		pod          *corev1.Pod
		wantCPU      string
		wantStandIns int
		wantOK       bool
	}{
		{name: "nothing charged: the whole gang", members: []*corev1.Pod{newPod("a", "1")},
			pod: newPod("a", "1"), wantCPU: "3", wantStandIns: 2, wantOK: true},
		{name: "one member bound holds its own quota",
			members: []*corev1.Pod{bound(newPod("a", "4")), newPod("b", "1"), newPod("c", "1")},
			pod:     newPod("b", "1"), wantCPU: "2", wantOK: true},
		{name: "one bound, one missing", members: []*corev1.Pod{bound(newPod("a", "4")), newPod("b", "1")},
			pod: newPod("b", "2"), wantCPU: "3", wantStandIns: 1, wantOK: true},
		{name: "the first three bound: whole, judged alone",
			members: []*corev1.Pod{bound(newPod("a", "1")), bound(newPod("b", "1")), bound(newPod("c", "1")), newPod("d", "5")},
			pod:     newPod("d", "5")},
		{name: "a charged member past minCount does not count",
			members: []*corev1.Pod{newPod("a", "1"), newPod("b", "1"), newPod("c", "1"), bound(newPod("d", "7"))},
			pod:     newPod("a", "1"), wantCPU: "3", wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, standIns, ok := Outstanding(g, tc.members, isBound, tc.pod, Charger{})
			if ok != tc.wantOK {
				t.Fatalf("Outstanding ok = %v, want %v (request %v)", ok, tc.wantOK, got)
			}
			if !ok {
				if got != nil {
					t.Errorf("Outstanding of a whole gang = %v, want nil", got)
				}
				return
			}
			want := resource.MustParse(tc.wantCPU)
			if cpu := got[corev1.ResourceCPU]; cpu.Cmp(want) != 0 || standIns != tc.wantStandIns {
				t.Errorf("Outstanding = cpu %s, %d stand-ins; want %s, %d", cpu.String(), standIns, tc.wantCPU, tc.wantStandIns)
			}
		})
	}
}

// TestRequestCountsCharges: with a Charger, each member counts its charge
// (requests and own devices), a stand-in the asking pod's, and a shared claim
// once, or not at all when the quota charges it already.
func TestRequestCountsCharges(t *testing.T) {
	const devices = corev1.ResourceName("gpu.example.com.deviceclass.resource.k8s.io/devices")
	one := resource.MustParse("1")
	two := resource.MustParse("2")
	charger := Charger{
		Charge: func(p *corev1.Pod) claims.Charge {
			own := p.Spec.Containers[0].Resources.Requests.DeepCopy()
			own[devices] = one
			return claims.Charge{Own: own, Shared: []claims.Shared{
				{Key: "resourceclaim/shared", Claim: "team-a/shared", Requests: corev1.ResourceList{devices: two}},
				{Key: "resourceclaim/held", Claim: "team-a/held", Requests: corev1.ResourceList{devices: two}},
			}}
		},
		SharedCharged: func(key types.UID) bool { return key == "resourceclaim/held" },
	}
	g := Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: 4}
	got, standIns := Request(g, []*corev1.Pod{newPod("a", "1"), newPod("b", "1")}, newPod("p", "2"), charger)
	// 2 members and 2 stand-ins of one device each, and the shared claim once.
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), devices: resource.MustParse("6")}
	if standIns != 2 || !equalLists(got, want) {
		t.Errorf("Request = %v, %d stand-ins; want %v, 2", got, standIns, want)
	}
	// The zero Charger counts requests only.
	got, _ = Request(g, []*corev1.Pod{newPod("a", "1")}, newPod("p", "2"), Charger{})
	if want := (corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}); !equalLists(got, want) {
		t.Errorf("Request with no charger = %v, want %v", got, want)
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if w, ok := b[name]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
