package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodEvents(t *testing.T) {
	pod := seedWorkloadPod()
	otherPod := pod.DeepCopy()
	otherPod.UID = "an-earlier-pod-of-the-same-name"
	kubelet := event(pod, "Pulled", "kubelet", "image pulled", 3*time.Minute)
	// events.k8s.io events reach core/v1 with eventTime and a series, no lastTimestamp.
	series := event(pod, "FailedScheduling", "", "0/2 nodes are available", 0)
	series.LastTimestamp = metav1.Time{}
	series.Count = 0
	series.ReportingController = "default-scheduler"
	series.EventTime = metav1.NewMicroTime(now.Add(-4 * time.Minute))
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))}

	got := podEvents(pod, eventsOf(
		event(pod, "NotTriggerScaleUp", "cluster-autoscaler", "quota", time.Minute),
		kubelet,
		series,
		event(otherPod, "FailedScheduling", "default-scheduler", "old pod", time.Hour),
		event(pod, "TriggeredScaleUp", "cluster-autoscaler", "scale-up", 2*time.Minute),
		nil,
	))
	want := []Event{
		{Time: now.Add(-2 * time.Minute), Type: "Normal", Reason: "TriggeredScaleUp", From: "cluster-autoscaler", Count: 1, Message: "scale-up"},
		{Time: now.Add(-time.Minute), Type: "Normal", Reason: "NotTriggerScaleUp", From: "cluster-autoscaler", Count: 1, Message: "quota"},
		{Time: now.Add(-30 * time.Second), Type: "Normal", Reason: "FailedScheduling", From: "default-scheduler", Count: 7, Message: "0/2 nodes are available"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events, newest last (-want +got):\n%s", diff)
	}

	var many []*corev1.Event
	for i := 0; i < 15; i++ {
		many = append(many, event(pod, "FailedScheduling", "default-scheduler", fmt.Sprint(i), time.Duration(15-i)*time.Minute))
	}
	got = podEvents(pod, many)
	if len(got) != maxEvents || got[0].Message != "5" || got[maxEvents-1].Message != "14" {
		t.Errorf("kept %d events from %q to %q, want the newest %d", len(got), got[0].Message, got[len(got)-1].Message, maxEvents)
	}
	if got := podEvents(pod, nil); got == nil || len(got) != 0 {
		t.Errorf("no events: %#v, want an empty list (JSON [])", got)
	}
}

func TestContributors(t *testing.T) {
	tree := seedTree(t)
	bare := replicaPods("namespace2", "bare", 1, "8", "seed-1", time.Minute)[0]
	bare.OwnerReferences = nil
	job := replicaPods("namespace2", "batch", 2, "1", "seed-1", 2*time.Minute)
	for _, p := range job {
		p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "Job", "batch"
		delete(p.Labels, "pod-template-hash")
	}
	finished := replicaPods("namespace1", "done", 1, "30", "seed-1", time.Minute)[0]
	finished.Status.Phase = corev1.PodSucceeded
	pods := append(append(replicaPods("namespace1", "nginx1", 2, "5", "seed-1", time.Hour),
		bare, finished, replicaPods("namespace3", "elsewhere", 1, "9", "seed-1", time.Minute)[0]), job...)
	m, err := newModel(tree, pods, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := m.tree.Node("root.a")
	got, more := contributors(m.tree, node, "cpu", pods, 10)
	var names []string
	for _, c := range got {
		names = append(names, fmt.Sprintf("%s/%s %d %s", c.Namespace, c.Workload, c.Pods, pairs(c.Requests)))
	}
	want := []string{
		"namespace1/Deployment/nginx1 2 cpu=10",
		"namespace2/Pod/bare-5d8c9-0 1 cpu=8",
		"namespace2/Job/batch 2 cpu=2",
	}
	if diff := cmp.Diff(want, names); diff != "" || more != 0 {
		t.Errorf("contributors of root.a, %d more (-want +got):\n%s", more, diff)
	}
	if got, more := contributors(m.tree, node, "cpu", pods, 1); len(got) != 1 || more != 2 {
		t.Errorf("top 1: %d listed, %d more", len(got), more)
	}
}
