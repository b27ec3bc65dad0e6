// Package api is the format of the cluster autoscaler's status ConfigMap: its
// name, key and annotation, the document's types, and the parser. It is a leaf,
// as upstream's clusterstate/api, so that a reader such as kubectl-quota gets
// the format without linking the autoscaler; clusterstate writes it.
package api

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// ParseStatus decodes the document of a status ConfigMap.
func ParseStatus(doc string) (Status, error) {
	var s Status
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		return s, fmt.Errorf("decoding the autoscaler status: %w", err)
	}
	return s, nil
}
