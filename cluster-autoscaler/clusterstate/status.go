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

// The status ConfigMap has upstream's name, key and structured YAML, so that the
// tools that read cluster-autoscaler-status keep working.
const (
	StatusConfigMapName = "cluster-autoscaler-status"
	StatusConfigMapKey  = "status"
)

// Status is the document in the status ConfigMap.
type Status struct {
	Time             string            `json:"time"`
	AutoscalerStatus string            `json:"autoscalerStatus"`
	Message          string            `json:"message,omitempty"`
	ClusterWide      ClusterWideStatus `json:"clusterWide"`
	NodeGroups       []NodeGroupStatus `json:"nodeGroups,omitempty"`
}

// ClusterWideStatus covers every node.
type ClusterWideStatus struct {
	Health    HealthCondition    `json:"health"`
	ScaleUp   ScaleUpCondition   `json:"scaleUp"`
	ScaleDown ScaleDownCondition `json:"scaleDown"`
}

// NodeGroupStatus covers one group.
type NodeGroupStatus struct {
	Name      string             `json:"name"`
	Health    NodeGroupHealth    `json:"health"`
	ScaleUp   NodeGroupScaleUp   `json:"scaleUp"`
	ScaleDown ScaleDownCondition `json:"scaleDown"`
}

// HealthCondition is Healthy or Unhealthy with node counts.
type HealthCondition struct {
	Status             string       `json:"status"`
	NodeCounts         NodeCounts   `json:"nodeCounts"`
	LastProbeTime      metav1.Time  `json:"lastProbeTime"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupHealth adds the group's sizes.
type NodeGroupHealth struct {
	HealthCondition     `json:",inline"`
	CloudProviderTarget int `json:"cloudProviderTarget"`
	MinSize             int `json:"minSize"`
	MaxSize             int `json:"maxSize"`
}

// NodeCounts counts nodes as upstream does.
type NodeCounts struct {
	Registered       RegisteredCounts `json:"registered"`
	LongUnregistered int              `json:"longUnregistered"`
	Unregistered     int              `json:"unregistered"`
}

// RegisteredCounts split registered nodes.
type RegisteredCounts struct {
	Total      int `json:"total"`
	Ready      int `json:"ready"`
	NotStarted int `json:"notStarted"`
}

// ScaleUpCondition is InProgress or NoActivity.
type ScaleUpCondition struct {
	Status             string       `json:"status"`
	LastProbeTime      metav1.Time  `json:"lastProbeTime"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupScaleUp adds Backoff and its cause.
type NodeGroupScaleUp struct {
	ScaleUpCondition `json:",inline"`
	BackoffInfo      BackoffInfo `json:"backoffInfo"`
}

// BackoffInfo is the error that started a backoff.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ScaleDownCondition is CandidatesPresent or NoCandidates.
type ScaleDownCondition struct {
	Status        string      `json:"status"`
	Candidates    int         `json:"candidates,omitempty"`
	LastProbeTime metav1.Time `json:"lastProbeTime"`
}

// Condition statuses, as upstream spells them.
const (
	Healthy           = "Healthy"
	InProgress        = "InProgress"
	NoActivity        = "NoActivity"
	Backoff           = "Backoff"
	NoCandidates      = "NoCandidates"
	CandidatesPresent = "CandidatesPresent"
)

// Status renders the last loop's state. scaleDownCandidates counts unneeded
// nodes per group (nil when scale-down is off).
func (r *Registry) Status(scaleDownCandidates map[string]int) Status {
	s := r.last
	if s == nil {
		return Status{AutoscalerStatus: "Initializing"}
	}
	probe := metav1.NewTime(s.Now)
	out := Status{
		Time:             s.Now.UTC().Format("2006-01-02 15:04:05.999999999 -0700 MST"),
		AutoscalerStatus: "Running",
	}
	var total NodeCounts
	anyInProgress, candidates := false, 0
	for _, g := range s.Groups {
		counts := NodeCounts{
			Registered:       RegisteredCounts{Total: g.Registered, Ready: g.Ready, NotStarted: g.Registered - g.Ready},
			Unregistered:     len(g.Unregistered) - len(g.Late),
			LongUnregistered: len(g.Late),
		}
		total.Registered.Total += counts.Registered.Total
		total.Registered.Ready += counts.Registered.Ready
		total.Registered.NotStarted += counts.Registered.NotStarted
		total.Unregistered += counts.Unregistered
		total.LongUnregistered += counts.LongUnregistered
		up := NodeGroupScaleUp{ScaleUpCondition: ScaleUpCondition{Status: NoActivity, LastProbeTime: probe}}
		if last, ok := r.lastScaleUp[g.Group.Id()]; ok {
			t := metav1.NewTime(last)
			up.LastTransitionTime = &t
		}
		if g.Upcoming > 0 {
			up.Status = InProgress
			anyInProgress = true
		}
		if backedOff, info := r.BackedOff(g.Group.Id(), s.Now); backedOff {
			up.Status = Backoff
			up.BackoffInfo = BackoffInfo{ErrorCode: info.ErrorCode, ErrorMessage: info.ErrorMessage}
		}
		down := ScaleDownCondition{Status: NoCandidates, LastProbeTime: probe}
		if n := scaleDownCandidates[g.Group.Id()]; n > 0 {
			down = ScaleDownCondition{Status: CandidatesPresent, Candidates: n, LastProbeTime: probe}
			candidates += n
		}
		out.NodeGroups = append(out.NodeGroups, NodeGroupStatus{
			Name: g.Group.Id(),
			Health: NodeGroupHealth{
				HealthCondition:     HealthCondition{Status: Healthy, NodeCounts: counts, LastProbeTime: probe},
				CloudProviderTarget: g.Target, MinSize: g.Min, MaxSize: g.Max,
			},
			ScaleUp:   up,
			ScaleDown: down,
		})
	}
	total.Registered.Total += s.Unmanaged
	total.Registered.Ready += s.Unmanaged
	out.ClusterWide = ClusterWideStatus{
		Health:    HealthCondition{Status: Healthy, NodeCounts: total, LastProbeTime: probe},
		ScaleUp:   ScaleUpCondition{Status: NoActivity, LastProbeTime: probe},
		ScaleDown: ScaleDownCondition{Status: NoCandidates, LastProbeTime: probe},
	}
	if anyInProgress {
		out.ClusterWide.ScaleUp.Status = InProgress
	}
	if candidates > 0 {
		out.ClusterWide.ScaleDown = ScaleDownCondition{Status: CandidatesPresent, Candidates: candidates, LastProbeTime: probe}
	}
	return out
}

// WriteStatusConfigMap writes status into namespace/cluster-autoscaler-status,
// creating it when missing.
func WriteStatusConfigMap(ctx context.Context, client kubernetes.Interface, namespace string, status Status, now time.Time) error {
	doc, err := yaml.Marshal(status)
	if err != nil {
		return fmt.Errorf("encoding the autoscaler status: %w", err)
	}
	cms := client.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, StatusConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMapName, Namespace: namespace}}
		cm.Data = map[string]string{StatusConfigMapKey: string(doc)}
		cm.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/last-updated": now.UTC().String()}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, StatusConfigMapName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, StatusConfigMapName, err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[StatusConfigMapKey] = string(doc)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["cluster-autoscaler.kubernetes.io/last-updated"] = now.UTC().String()
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, StatusConfigMapName, err)
	}
	return nil
}

// ParseStatus decodes the document of a status ConfigMap.
func ParseStatus(doc string) (Status, error) {
	var s Status
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		return s, fmt.Errorf("decoding the autoscaler status: %w", err)
	}
	return s, nil
}
