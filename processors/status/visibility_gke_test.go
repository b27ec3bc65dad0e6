package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
)

// decodeLines parses every line as free JSON, so the test checks the names
// written and not the Go types that wrote them.
func decodeLines(t *testing.T, buf *bytes.Buffer) []any {
	t.Helper()
	dec := json.NewDecoder(buf)
	var out []any
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return v
}

func gkeLog(buf *bytes.Buffer) *VisibilityLog {
	v := NewVisibilityLog(buf, FormatGKE)
	n := 0
	v.newEventID = func() string { n++; return fmt.Sprintf("event-%d", n) }
	return v
}

func TestVisibilityLogGKEScaleUp(t *testing.T) {
	var buf bytes.Buffer
	v := gkeLog(&buf)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lc := &processors.LoopContext{Now: now, Templates: map[string]*cloudprovider.NodeInfo{
		"grp": {Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelTopologyZone: "us-central1-f"}}}},
	}}
	const quota = `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`
	rejected := func(plugin string, texts ...string) []processors.Reason {
		var out []processors.Reason
		for _, text := range texts {
			r := processors.NewReason(processors.MessageNodeGroupRejected, text)
			r.Plugin = plugin
			out = append(out, r)
		}
		return out
	}
	v.Process(context.Background(), lc, &processors.ScaleUpStatus{
		Increases:            []processors.GroupIncrease{{Group: group{id: "grp"}, Current: 0, New: 4, Max: 20}},
		PodsTriggeredScaleUp: []*corev1.Pod{pod("a")},
		PodsRemainUnschedulable: []processors.NoScaleUpInfo{
			{Pods: []*corev1.Pod{pod("b"), pod("c")}, Skipped: map[string][]processors.Reason{"grp": reasons(quota)}},
			{Pods: []*corev1.Pod{pod("d")}, Rejected: map[string][]processors.Reason{
				"other": rejected("NodeResourcesFit", "Insufficient cpu", "Insufficient memory"),
			}},
		},
		Refused: []processors.RefusedPod{{Pod: pod("e"), Reason: processors.NewReason(processors.MessagePodRefused,
			`exceeded elastic quota: "ElasticQuotaTree/root.a", resources: cpu`)}},
	})
	want := []any{
		mustJSON(t, `{"logger":"cluster-autoscaler-visibility","decision":{"decideTime":"1796040000","eventId":"event-1",
			"scaleUp":{"increasedMigs":[{"mig":{"name":"grp","nodepool":"grp","zone":"us-central1-f"},"requestedNodes":4}],
			"triggeringPods":[{"name":"a","namespace":"ns"}],"triggeringPodsTotalCount":1}}}`),
		mustJSON(t, `{"logger":"cluster-autoscaler-visibility","noDecisionStatus":{"measureTime":"1796040000","noScaleUp":{
			"skippedMigs":[{"mig":{"name":"grp","nodepool":"grp","zone":"us-central1-f"},
				"reason":{"messageId":"no.scale.up.mig.skipped","parameters":["exceeded quota: \"CapacityQuota/test-capacityquota\", resources: cpu"]}}],
			"unhandledPodGroups":[
				{"podGroup":{"samplePod":{"name":"b","namespace":"ns"},"totalPodCount":2}},
				{"podGroup":{"samplePod":{"name":"d","namespace":"ns"},"totalPodCount":1},
				 "rejectedMigs":[{"mig":{"name":"other","nodepool":"other"},
				   "reason":{"messageId":"no.scale.up.mig.failing.predicate","parameters":["NodeResourcesFit","Insufficient cpu","Insufficient memory"]}}]},
				{"podGroup":{"samplePod":{"name":"e","namespace":"ns"},"totalPodCount":1},
				 "podRefusal":{"messageId":"no.scale.up.pod.refused","parameters":["exceeded elastic quota: \"ElasticQuotaTree/root.a\", resources: cpu"]}}],
			"unhandledPodGroupsTotalCount":3}}}`),
	}
	if diff := cmp.Diff(want, decodeLines(t, &buf)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestVisibilityLogGKEScaleDown(t *testing.T) {
	var buf bytes.Buffer
	v := gkeLog(&buf)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	kept := func(name, reason string, params ...string) processors.KeptNode {
		return processors.KeptNode{Node: node(name), GroupID: "grp", Reason: processors.Reason{
			MessageID: processors.MessageNoScaleDownNode + "." + reason, Parameters: params}}
	}
	v.ProcessScaleDown(context.Background(), &processors.LoopContext{Now: now}, &processors.ScaleDownStatus{
		Removed: []processors.NodeRemoval{{Node: node("n1"), GroupID: "grp", Evicted: []*corev1.Pod{pod("a")}}},
		Failed:  []processors.FailedRemoval{{NodeRemoval: processors.NodeRemoval{Node: node("n2"), GroupID: "grp"}, Err: errors.New("eviction refused")}},
		Kept: []processors.KeptNode{
			kept("n3", "NotReplicated", "ns/bare"),
			kept("n4", "NoPlaceToMovePods"),
			kept("n5", "ElasticQuotaTreeRootMin"),
		},
	})
	want := []any{
		mustJSON(t, `{"logger":"cluster-autoscaler-visibility","decision":{"decideTime":"1796040000","eventId":"event-1",
			"scaleDown":{"nodesToBeRemoved":[
				{"node":{"name":"n1","mig":{"name":"grp","nodepool":"grp"}},"evictedPods":[{"name":"a","namespace":"ns"}],"evictedPodsTotalCount":1},
				{"node":{"name":"n2","mig":{"name":"grp","nodepool":"grp"}},"evictedPodsTotalCount":0}]}}}`),
		mustJSON(t, `{"logger":"cluster-autoscaler-visibility","resultInfo":{"measureTime":"1796040000","results":[
			{"eventId":"event-1","errorMsg":{"messageId":"scale.down.error.failed","parameters":["n2","eviction refused"]}}]}}`),
		mustJSON(t, `{"logger":"cluster-autoscaler-visibility","noDecisionStatus":{"measureTime":"1796040000","noScaleDown":{"nodes":[
			{"node":{"name":"n3","mig":{"name":"grp","nodepool":"grp"}},"reason":{"messageId":"no.scale.down.node.pod.not.backed.by.controller","parameters":["ns/bare"]}},
			{"node":{"name":"n4","mig":{"name":"grp","nodepool":"grp"}},"reason":{"messageId":"no.scale.down.node.no.place.to.move.pods","parameters":null}},
			{"node":{"name":"n5","mig":{"name":"grp","nodepool":"grp"}},"reason":{"messageId":"no.scale.down.node.ElasticQuotaTreeRootMin","parameters":null}}],
			"nodesTotalCount":3}}}`),
	}
	if diff := cmp.Diff(want, decodeLines(t, &buf)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestParseVisibilityFormat(t *testing.T) {
	for _, s := range []string{"gke", "quotascale"} {
		if f, err := ParseVisibilityFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseVisibilityFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseVisibilityFormat("GKE"); err == nil {
		t.Error("ParseVisibilityFormat(GKE) accepted a name it does not know")
	}
}
