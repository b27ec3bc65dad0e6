// Package status reports each scale-up decision: pod events in upstream's words,
// the visibility log, and metrics.
package status

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

// Event reasons on pods, as upstream names them.
const (
	EventTriggeredScaleUp  = "TriggeredScaleUp"
	EventNotTriggerScaleUp = "NotTriggerScaleUp"
)

// EventProcessor tells each pending pod whether it triggered a scale-up, and if
// not, why, counting the node groups behind each reason.
type EventProcessor struct {
	Recorder record.EventRecorder
}

var (
	_ processors.ScaleUpStatusProcessor   = &EventProcessor{}
	_ processors.ScaleDownStatusProcessor = &EventProcessor{}
)

// Process records the events of one loop.
func (e *EventProcessor) Process(_ context.Context, _ *processors.LoopContext, s *processors.ScaleUpStatus) {
	if len(s.Increases) > 0 {
		msg := "pod triggered scale-up: " + IncreasesString(s.Increases)
		for _, p := range s.PodsTriggeredScaleUp {
			e.Recorder.Event(p, corev1.EventTypeNormal, EventTriggeredScaleUp, msg)
		}
	}
	for _, info := range s.PodsRemainUnschedulable {
		msg := NoScaleUpMessage(info) + GangContext(info.Gang)
		for _, p := range info.Pods {
			e.Recorder.Event(p, corev1.EventTypeNormal, EventNotTriggerScaleUp, msg)
		}
	}
	for _, r := range s.Refused {
		e.Recorder.Event(r.Pod, corev1.EventTypeNormal, EventNotTriggerScaleUp, "pod didn't trigger scale-up: "+r.Reason.Message+GangContext(r.Gang))
	}
}

// GangContext follows upstream's reasons with the gang whose pods take new
// nodes together, e.g. " (gang ml/train: 3 pods scale up together)"; it is
// empty for pods of no gang, whose messages stay upstream's.
func GangContext(g *gang.Gang) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf(" (gang %s: %d pods scale up together)", g.Key, g.MinCount)
}

// IncreasesString renders increases as upstream does: [{group 3->5 (max: 10)}].
func IncreasesString(increases []processors.GroupIncrease) string {
	parts := make([]string, 0, len(increases))
	for _, inc := range increases {
		parts = append(parts, fmt.Sprintf("{%s %d->%d (max: %d)}", inc.Group.Id(), inc.Current, inc.New, inc.Max))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// NoScaleUpMessage counts, for each reason, the node groups it applies to: the
// groups whose predicates the pods fail, and the groups they fit but that may not
// grow. Groups irrelevant to the pod do not appear. Reasons come most frequent
// first, then alphabetically, e.g.
//
//	pod didn't trigger scale-up: 3 node(s) didn't match Pod's node affinity/selector, 1 max node group size reached
func NoScaleUpMessage(info processors.NoScaleUpInfo) string {
	counts := map[string]int{}
	add := func(byGroup map[string][]processors.Reason) {
		for _, reasons := range byGroup {
			seen := map[string]bool{}
			for _, r := range reasons {
				if !seen[r.Message] {
					seen[r.Message] = true
					counts[r.Message]++
				}
			}
		}
	}
	add(info.Rejected)
	add(info.Skipped)
	if len(counts) == 0 {
		return "pod didn't trigger scale-up: no node group can host it"
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, len(reasons))
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return "pod didn't trigger scale-up: " + strings.Join(parts, ", ")
}

// Scale-down events on nodes, as upstream names them.
const (
	EventScaleDown       = "ScaleDown"
	EventScaleDownFailed = "ScaleDownFailed"
	EventNoScaleDown     = "NoScaleDown"
)

// ProcessScaleDown records events on the nodes removed, the nodes whose removal
// failed, and the nodes kept by a limit (group min size, cluster minimums, the
// ElasticQuotaTree's root min) rather than by their pods.
func (e *EventProcessor) ProcessScaleDown(_ context.Context, _ *processors.LoopContext, s *processors.ScaleDownStatus) {
	for _, r := range s.Removed {
		e.Recorder.Eventf(r.Node, corev1.EventTypeNormal, EventScaleDown, "node removed by cluster autoscaler, %d pod(s) evicted", len(r.Evicted))
		for _, p := range r.Evicted {
			e.Recorder.Eventf(p, corev1.EventTypeNormal, EventScaleDown, "deleting pod for node scale down (node %s)", r.Node.Name)
		}
	}
	for _, f := range s.Failed {
		e.Recorder.Eventf(f.Node, corev1.EventTypeWarning, EventScaleDownFailed, "node removal failed and was rolled back: %v", f.Err)
	}
	for _, k := range s.Kept {
		if limitReasons[lastSegment(k.Reason.MessageID)] {
			e.Recorder.Event(k.Node, corev1.EventTypeNormal, EventNoScaleDown, "node is unneeded but kept: "+k.Reason.Message)
		}
	}
}

var limitReasons = map[string]bool{
	"NodeGroupMinSizeReached":      true,
	"MinimalResourceLimitExceeded": true,
	"ElasticQuotaTreeRootMin":      true,
}

func lastSegment(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '.' {
			return id[i+1:]
		}
	}
	return id
}
