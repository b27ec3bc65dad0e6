package clusterstate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
)

// maxErrorMessageSize bounds a backoff's error message, as upstream's, because
// a ConfigMap holds at most 1 MiB.
const maxErrorMessageSize = 500

func nodeCounts(r Readiness) api.NodeCounts {
	return api.NodeCounts{
		Registered: api.RegisteredCounts{
			Total: r.Registered, Ready: r.Ready, NotStarted: r.NotStarted, Suspended: r.Suspended, BeingDeleted: r.Deleted,
			Unready: api.UnreadyCounts{Total: r.Unready, ResourceUnready: r.ResourceUnready},
		},
		LongUnregistered: r.LongUnregistered,
		Unregistered:     r.Unregistered,
	}
}

func healthStatus(healthy bool) string {
	if healthy {
		return api.Healthy
	}
	return api.Unhealthy
}

// since keeps the previous transition time while the status stays the same,
// as upstream: a condition's lastTransitionTime is when it took its status.
func since(status, previous string, previousTime, now metav1.Time) metav1.Time {
	if status == previous {
		return previousTime
	}
	return now
}

// Status renders the loop's state and health in upstream's format.
// scaleDownCandidates counts unneeded nodes per group (nil when scale-down is
// off); previous is the last document written, whose transition times are
// kept where a status did not change.
func (r *Registry) Status(h *Health, scaleDownCandidates map[string]int, previous api.Status) api.Status {
	s := r.last
	if s == nil || h == nil {
		return api.Status{AutoscalerStatus: api.Initializing}
	}
	probe := metav1.NewTime(s.Now)
	last := map[string]api.NodeGroupStatus{}
	for _, g := range previous.NodeGroups {
		last[g.Name] = g
	}
	out := api.Status{AutoscalerStatus: api.Running}
	anyInProgress, candidates := false, 0
	for _, g := range s.Groups {
		id := g.Group.Id()
		gh := h.Groups[id]
		prev := last[id]
		health := api.NodeGroupHealth{
			Status: healthStatus(gh.Healthy), NodeCounts: nodeCounts(gh.Readiness),
			CloudProviderTarget: g.Target, MinSize: g.Min, MaxSize: g.Max, LastProbeTime: probe,
		}
		health.LastTransitionTime = since(health.Status, prev.Health.Status, prev.Health.LastTransitionTime, probe)

		up := api.NodeGroupScaleUp{Status: api.NoActivity, LastProbeTime: probe}
		_, scalingUp := r.requests[id]
		backedOff, info := r.BackedOff(id, s.Now)
		switch {
		case scalingUp:
			up.Status = api.InProgress
			anyInProgress = true
		case !gh.Healthy:
			up.Status = api.Unhealthy
		case backedOff:
			up.Status = api.Backoff
			up.BackoffInfo = api.BackoffInfo{ErrorCode: info.ErrorCode, ErrorMessage: truncate(info.ErrorMessage, maxErrorMessageSize)}
		}
		up.LastTransitionTime = since(up.Status, prev.ScaleUp.Status, prev.ScaleUp.LastTransitionTime, probe)

		down := scaleDown(scaleDownCandidates[id], probe, prev.ScaleDown)
		candidates += down.Candidates
		out.NodeGroups = append(out.NodeGroups, api.NodeGroupStatus{Name: id, Health: health, ScaleUp: up, ScaleDown: down})
	}
	pc := previous.ClusterWide
	cw := api.ClusterWideStatus{
		Health:    api.HealthCondition{Status: healthStatus(h.ClusterHealthy), NodeCounts: nodeCounts(h.Cluster), LastProbeTime: probe},
		ScaleUp:   api.ScaleUpCondition{Status: api.NoActivity, LastProbeTime: probe},
		ScaleDown: scaleDown(candidates, probe, pc.ScaleDown),
	}
	if anyInProgress {
		cw.ScaleUp.Status = api.InProgress
	}
	cw.Health.LastTransitionTime = since(cw.Health.Status, pc.Health.Status, pc.Health.LastTransitionTime, probe)
	cw.ScaleUp.LastTransitionTime = since(cw.ScaleUp.Status, pc.ScaleUp.Status, pc.ScaleUp.LastTransitionTime, probe)
	out.ClusterWide = cw
	return out
}

func scaleDown(candidates int, probe metav1.Time, prev api.ScaleDownCondition) api.ScaleDownCondition {
	c := api.ScaleDownCondition{Status: api.NoCandidates, Candidates: candidates, LastProbeTime: probe}
	if candidates > 0 {
		c.Status = api.CandidatesPresent
	}
	c.LastTransitionTime = since(c.Status, prev.Status, prev.LastTransitionTime, probe)
	return c
}

// truncate cuts s to at most n bytes, ending in upstream's marker when cut.
func truncate(s string, n int) string {
	const marker = "<truncated>"
	if len(s) <= n {
		return s
	}
	return s[:n-len(marker)] + marker
}

// WriteStatusConfigMap writes status into namespace/name, creating the
// ConfigMap when missing, with the time of now as upstream writes it, and
// returns the ConfigMap written.
func WriteStatusConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, status api.Status, now time.Time) (*corev1.ConfigMap, error) {
	status.Time = now.Format(api.StatusTimeLayout)
	doc, err := yaml.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding the autoscaler status: %w", err)
	}
	cms := client.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Annotations: map[string]string{api.LastUpdatedAnnotation: status.Time}}}
		cm.Data = map[string]string{api.StatusConfigMapKey: string(doc)}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, name, err)
		}
		return created, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[api.StatusConfigMapKey] = string(doc)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[api.LastUpdatedAnnotation] = status.Time
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, name, err)
	}
	return updated, nil
}
