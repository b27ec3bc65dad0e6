package report

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxEvents keeps the explanation to the recent history; older events repeat
// the same refusals.
const maxEvents = 10

// schedulingReasons are the events that tell a pod's placement story; other
// components' events (the kubelet pulling images...) are left out.
var schedulingReasons = map[string]bool{
	"FailedScheduling":  true,
	"Scheduled":         true,
	"Preempted":         true,
	"Preempting":        true,
	"NotTriggerScaleUp": true,
	"TriggeredScaleUp":  true,
	"ScaleDown":         true,
	"Evicted":           true,
}

// podEvents are the scheduler's and the autoscaler's events for pod, oldest
// first so the newest ends the list, at most maxEvents of them.
func podEvents(pod *corev1.Pod, events []*corev1.Event) []Event {
	var out []Event
	for _, e := range events {
		if e == nil || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != pod.Name || e.InvolvedObject.Namespace != pod.Namespace {
			continue
		}
		if e.InvolvedObject.UID != "" && pod.UID != "" && e.InvolvedObject.UID != pod.UID {
			continue // an earlier pod of the same name
		}
		from := e.ReportingController
		if from == "" {
			from = e.Source.Component
		}
		if !schedulingReasons[e.Reason] && !strings.Contains(from, "scheduler") && !strings.Contains(from, "autoscaler") {
			continue
		}
		count := e.Count
		if e.Series != nil && e.Series.Count > count {
			count = e.Series.Count
		}
		out = append(out, Event{Time: lastSeen(e), Type: e.Type, Reason: e.Reason, From: from, Count: max(count, 1), Message: e.Message})
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Reason+a.Message, b.Reason+b.Message)
	})
	if len(out) > maxEvents {
		out = out[len(out)-maxEvents:]
	}
	if out == nil {
		out = []Event{}
	}
	return out
}

// lastSeen is the event's last occurrence: core events set lastTimestamp,
// events.k8s.io events set eventTime and their series.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time.UTC()
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time.UTC()
	case !e.EventTime.IsZero():
		return e.EventTime.Time.UTC()
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time.UTC()
	}
	return e.CreationTimestamp.Time.UTC()
}
