package status

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
)

type group struct {
	cloudprovider.NodeGroup
	id string
}

func (g group) Id() string { return g.id }

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

func reasons(msgs ...string) []processors.Reason {
	var out []processors.Reason
	for _, m := range msgs {
		out = append(out, processors.NewReason(processors.MessageNodeGroupSkipped, m))
	}
	return out
}

func TestNoScaleUpMessage(t *testing.T) {
	const affinity = "node(s) didn't match Pod's node affinity/selector"
	const quota = `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`
	for _, tc := range []struct {
		name string
		info processors.NoScaleUpInfo
		want string
	}{
		{
			name: "seed 001",
			info: processors.NoScaleUpInfo{Skipped: map[string][]processors.Reason{"grp": reasons(quota)}},
			want: `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`,
		},
		{
			name: "most frequent first, then alphabetical",
			info: processors.NoScaleUpInfo{
				Rejected: map[string][]processors.Reason{"a": reasons(affinity), "b": reasons(affinity), "c": reasons(affinity)},
				Skipped:  map[string][]processors.Reason{"d": reasons(quota), "e": reasons(quota), "f": reasons("max node group size reached")},
			},
			want: "pod didn't trigger scale-up: 3 " + affinity + ", 2 " + quota + ", 1 max node group size reached",
		},
		{
			name: "a reason repeated within one group counts once",
			info: processors.NoScaleUpInfo{Rejected: map[string][]processors.Reason{"a": reasons(affinity, affinity)}},
			want: "pod didn't trigger scale-up: 1 " + affinity,
		},
		{
			name: "no group at all",
			info: processors.NoScaleUpInfo{},
			want: "pod didn't trigger scale-up: no node group can host it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NoScaleUpMessage(tc.info)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventProcessor(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	p := &EventProcessor{Recorder: rec}
	p.Process(context.Background(), &processors.LoopContext{}, &processors.ScaleUpStatus{
		Increases:            []processors.GroupIncrease{{Group: group{id: "grp"}, Current: 3, New: 5, Max: 10}},
		PodsTriggeredScaleUp: []*corev1.Pod{pod("a")},
		PodsRemainUnschedulable: []processors.NoScaleUpInfo{{
			Pods: []*corev1.Pod{pod("b")}, Skipped: map[string][]processors.Reason{"grp": reasons("max node group size reached")},
		}},
		Refused: []processors.RefusedPod{{Pod: pod("c"), Reason: processors.NewReason(processors.MessagePodRefused,
			`exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`)}},
	})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal TriggeredScaleUp pod triggered scale-up: [{grp 3->5 (max: 10)}]",
		"Normal NotTriggerScaleUp pod didn't trigger scale-up: 1 max node group size reached",
		`Normal NotTriggerScaleUp pod didn't trigger scale-up: exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestVisibilityLog(t *testing.T) {
	var buf bytes.Buffer
	v := NewVisibilityLog(&buf, FormatQuotascale)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lc := &processors.LoopContext{Now: now, Templates: map[string]*cloudprovider.NodeInfo{
		"grp": {Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelTopologyZone: "us-central1-f"}}}},
	}}
	const quota = `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`
	v.Process(context.Background(), lc, &processors.ScaleUpStatus{
		Increases:            []processors.GroupIncrease{{Group: group{id: "grp"}, Current: 0, New: 4, Max: 20}},
		PodsTriggeredScaleUp: []*corev1.Pod{pod("a")},
		PodsRemainUnschedulable: []processors.NoScaleUpInfo{{
			Pods: []*corev1.Pod{pod("b"), pod("c")}, Skipped: map[string][]processors.Reason{"grp": reasons(quota)},
		}},
	})
	dec := json.NewDecoder(&buf)
	var got []Entry
	for dec.More() {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	skipped := []NodeGroupReason{{
		NodeGroup: NodeGroupRef{Name: "grp", Zone: "us-central1-f"},
		Reason:    Reason{MessageID: "no.scale.up.nodegroup.skipped", Parameters: []string{quota}},
	}}
	want := []Entry{
		{Time: now, Logger: VisibilityLogger, Decision: &Decision{ScaleUp: &ScaleUpDecision{
			IncreasedNodeGroups:      []IncreasedNodeGroup{{NodeGroup: NodeGroupRef{Name: "grp", Zone: "us-central1-f"}, RequestedNodes: 4, From: 0, To: 4, Max: 20}},
			TriggeringPods:           []PodRef{{Name: "a", Namespace: "ns"}},
			TriggeringPodsTotalCount: 1,
		}}},
		{Time: now, Logger: VisibilityLogger, NoDecisionStatus: &NoDecisionStatus{NoScaleUp: &NoScaleUp{
			SkippedNodeGroups: skipped,
			UnhandledPodGroups: []UnhandledPodGroup{{
				PodGroup:          PodGroup{SamplePod: PodRef{Name: "b", Namespace: "ns"}, TotalPodCount: 2},
				SkippedNodeGroups: skipped,
			}},
			UnhandledPodGroupsTotalCount: 1,
		}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}
