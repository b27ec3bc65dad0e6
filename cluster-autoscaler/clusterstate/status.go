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
)

// The status ConfigMap has upstream's default name, key, annotation and
// structured YAML (kubernetes-sigs/cluster-autoscaler pkg/clusterstate/api),
// so that the tools that read cluster-autoscaler-status keep working.
const (
	StatusConfigMapName = "cluster-autoscaler-status"
	StatusConfigMapKey  = "status"
	// LastUpdatedAnnotation holds the time the document was written.
	LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"
	// StatusTimeLayout is the layout of the document's time and of the
	// annotation, as upstream's.
	StatusTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"
	// maxErrorMessageSize bounds a backoff's error message, as upstream's,
	// because a ConfigMap holds at most 1 MiB.
	maxErrorMessageSize = 500
)

// Status is the document in the status ConfigMap.
type Status struct {
	Time string `json:"time,omitempty"`
	// AutoscalerStatus is Initializing or Running.
	AutoscalerStatus string            `json:"autoscalerStatus,omitempty"`
	Message          string            `json:"message,omitempty"`
	ClusterWide      ClusterWideStatus `json:"clusterWide,omitempty"`
	NodeGroups       []NodeGroupStatus `json:"nodeGroups,omitempty"`
}

// ClusterWideStatus covers every node.
type ClusterWideStatus struct {
	Health    HealthCondition    `json:"health,omitempty"`
	ScaleUp   ScaleUpCondition   `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownCondition `json:"scaleDown,omitempty"`
}

// NodeGroupStatus covers one group.
type NodeGroupStatus struct {
	Name      string             `json:"name,omitempty"`
	Health    NodeGroupHealth    `json:"health,omitempty"`
	ScaleUp   NodeGroupScaleUp   `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownCondition `json:"scaleDown,omitempty"`
}

// HealthCondition is Healthy or Unhealthy with node counts.
type HealthCondition struct {
	Status             string      `json:"status,omitempty"`
	NodeCounts         NodeCounts  `json:"nodeCounts,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupHealth is a group's health, with its sizes.
type NodeGroupHealth struct {
	Status              string      `json:"status,omitempty"`
	NodeCounts          NodeCounts  `json:"nodeCounts,omitempty"`
	CloudProviderTarget int         `json:"cloudProviderTarget"`
	MinSize             int         `json:"minSize"`
	MaxSize             int         `json:"maxSize"`
	LastProbeTime       metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime  metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeCounts count nodes by upstream's readiness categories.
type NodeCounts struct {
	Registered       RegisteredCounts `json:"registered,omitempty"`
	LongUnregistered int              `json:"longUnregistered"`
	Unregistered     int              `json:"unregistered"`
}

// RegisteredCounts split registered nodes.
type RegisteredCounts struct {
	Total        int `json:"total"`
	Ready        int `json:"ready"`
	NotStarted   int `json:"notStarted"`
	Suspended    int `json:"suspended"`
	BeingDeleted int `json:"beingDeleted,omitempty"`
	// Unready are the nodes that broke down after they started.
	Unready UnreadyCounts `json:"unready,omitempty"`
}

// UnreadyCounts count unready nodes, and among them those missing a resource
// (a GPU).
type UnreadyCounts struct {
	Total           int `json:"total"`
	ResourceUnready int `json:"resourceUnready"`
}

// ScaleUpCondition is InProgress or NoActivity cluster-wide.
type ScaleUpCondition struct {
	Status             string      `json:"status,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupScaleUp is a group's InProgress, Unhealthy, Backoff (with its
// cause) or NoActivity.
type NodeGroupScaleUp struct {
	Status             string      `json:"status,omitempty"`
	BackoffInfo        BackoffInfo `json:"backoffInfo,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// BackoffInfo is the error that started a backoff.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ScaleDownCondition is CandidatesPresent or NoCandidates.
type ScaleDownCondition struct {
	Status             string      `json:"status,omitempty"`
	Candidates         int         `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Condition statuses, as upstream spells them.
const (
	Initializing      = "Initializing"
	Running           = "Running"
	Healthy           = "Healthy"
	Unhealthy         = "Unhealthy"
	InProgress        = "InProgress"
	NoActivity        = "NoActivity"
	Backoff           = "Backoff"
	NoCandidates      = "NoCandidates"
	CandidatesPresent = "CandidatesPresent"
)

func nodeCounts(r Readiness) NodeCounts {
	return NodeCounts{
		Registered: RegisteredCounts{
			Total: r.Registered, Ready: r.Ready, NotStarted: r.NotStarted, Suspended: r.Suspended, BeingDeleted: r.Deleted,
			Unready: UnreadyCounts{Total: r.Unready, ResourceUnready: r.ResourceUnready},
		},
		LongUnregistered: r.LongUnregistered,
		Unregistered:     r.Unregistered,
	}
}

func healthStatus(healthy bool) string {
	if healthy {
		return Healthy
	}
	return Unhealthy
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
func (r *Registry) Status(h *Health, scaleDownCandidates map[string]int, previous Status) Status {
	s := r.last
	if s == nil || h == nil {
		return Status{AutoscalerStatus: Initializing}
	}
	probe := metav1.NewTime(s.Now)
	last := map[string]NodeGroupStatus{}
	for _, g := range previous.NodeGroups {
		last[g.Name] = g
	}
	out := Status{AutoscalerStatus: Running}
	anyInProgress, candidates := false, 0
	for _, g := range s.Groups {
		id := g.Group.Id()
		gh := h.Groups[id]
		prev := last[id]
		health := NodeGroupHealth{
			Status: healthStatus(gh.Healthy), NodeCounts: nodeCounts(gh.Readiness),
			CloudProviderTarget: g.Target, MinSize: g.Min, MaxSize: g.Max, LastProbeTime: probe,
		}
		health.LastTransitionTime = since(health.Status, prev.Health.Status, prev.Health.LastTransitionTime, probe)

		up := NodeGroupScaleUp{Status: NoActivity, LastProbeTime: probe}
		_, scalingUp := r.requests[id]
		backedOff, info := r.BackedOff(id, s.Now)
		switch {
		case scalingUp:
			up.Status = InProgress
			anyInProgress = true
		case !gh.Healthy:
			up.Status = Unhealthy
		case backedOff:
			up.Status = Backoff
			up.BackoffInfo = BackoffInfo{ErrorCode: info.ErrorCode, ErrorMessage: truncate(info.ErrorMessage, maxErrorMessageSize)}
		}
		up.LastTransitionTime = since(up.Status, prev.ScaleUp.Status, prev.ScaleUp.LastTransitionTime, probe)

		down := scaleDown(scaleDownCandidates[id], probe, prev.ScaleDown)
		candidates += down.Candidates
		out.NodeGroups = append(out.NodeGroups, NodeGroupStatus{Name: id, Health: health, ScaleUp: up, ScaleDown: down})
	}
	pc := previous.ClusterWide
	cw := ClusterWideStatus{
		Health:    HealthCondition{Status: healthStatus(h.ClusterHealthy), NodeCounts: nodeCounts(h.Cluster), LastProbeTime: probe},
		ScaleUp:   ScaleUpCondition{Status: NoActivity, LastProbeTime: probe},
		ScaleDown: scaleDown(candidates, probe, pc.ScaleDown),
	}
	if anyInProgress {
		cw.ScaleUp.Status = InProgress
	}
	cw.Health.LastTransitionTime = since(cw.Health.Status, pc.Health.Status, pc.Health.LastTransitionTime, probe)
	cw.ScaleUp.LastTransitionTime = since(cw.ScaleUp.Status, pc.ScaleUp.Status, pc.ScaleUp.LastTransitionTime, probe)
	out.ClusterWide = cw
	return out
}

func scaleDown(candidates int, probe metav1.Time, prev ScaleDownCondition) ScaleDownCondition {
	c := ScaleDownCondition{Status: NoCandidates, Candidates: candidates, LastProbeTime: probe}
	if candidates > 0 {
		c.Status = CandidatesPresent
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
func WriteStatusConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, status Status, now time.Time) (*corev1.ConfigMap, error) {
	status.Time = now.Format(StatusTimeLayout)
	doc, err := yaml.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding the autoscaler status: %w", err)
	}
	cms := client.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Annotations: map[string]string{LastUpdatedAnnotation: status.Time}}}
		cm.Data = map[string]string{StatusConfigMapKey: string(doc)}
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
	cm.Data[StatusConfigMapKey] = string(doc)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LastUpdatedAnnotation] = status.Time
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, name, err)
	}
	return updated, nil
}

// ParseStatus decodes the document of a status ConfigMap.
func ParseStatus(doc string) (Status, error) {
	var s Status
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		return s, fmt.Errorf("decoding the autoscaler status: %w", err)
	}
	return s, nil
}
