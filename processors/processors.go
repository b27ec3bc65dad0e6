// Package processors defines the extension points of the autoscaler's loop, as
// upstream's processor chain does: pod list processors narrow the pods a scale-up
// considers, scale-up limiters cap what a node group may grow by, and status
// processors report each decision. The CapacityQuota and ElasticQuotaTree logic
// plug in here.
package processors

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/quota/gang"
)

// LoopContext is what processors see of one autoscaler loop.
type LoopContext struct {
	Now time.Time
	// Nodes are the registered nodes.
	Nodes []*corev1.Node
	// Groups are the node groups the provider reports, in a stable order.
	Groups []cloudprovider.NodeGroup
	// Templates hold each group's template node, by group id.
	Templates map[string]*cloudprovider.NodeInfo
	// Upcoming counts, per group id, the nodes the group has asked for and has
	// not registered: its target minus its registered nodes, and at least its
	// instances without a registered node (creating, failed or past their
	// provisioning time alike, until they are gone).
	Upcoming map[string]int
}

// PodListProcessor narrows the unschedulable pods a scale-up considers. Pods it
// drops must be reported through Refused so they get an event.
type PodListProcessor interface {
	Process(ctx context.Context, lc *LoopContext, pods []*corev1.Pod) (kept []*corev1.Pod, refused []RefusedPod, err error)
}

// RefusedPod is a pod a processor decided no scale-up can help, and why.
type RefusedPod struct {
	Pod    *corev1.Pod
	Reason Reason
	// Gang is the pod's gang when the gang as a whole was refused.
	Gang *gang.Gang
}

// ScaleUpLimiter caps how far one node group may grow in this loop.
type ScaleUpLimiter interface {
	// StartLoop refreshes what the limiter knows at the start of every loop.
	StartLoop(ctx context.Context, lc *LoopContext) error
	// Headroom returns how many of wanted new nodes of group may be added, and
	// the reasons it is fewer.
	Headroom(ctx context.Context, lc *LoopContext, group cloudprovider.NodeGroup, template *corev1.Node, wanted int) (int, []Reason)
	// Planned records nodes this loop decided to add, so that the next group
	// checked in the same loop sees them.
	Planned(ctx context.Context, lc *LoopContext, group cloudprovider.NodeGroup, template *corev1.Node, count int)
}

// GangLimiter is a ScaleUpLimiter told of the gangs its headroom left
// without nodes: a gang gets all the nodes it needs or none.
type GangLimiter interface {
	// GangCapped says that the headroom of group's last Headroom call was
	// too small for g, which therefore gets no node of group.
	GangCapped(ctx context.Context, lc *LoopContext, group cloudprovider.NodeGroup, g gang.Gang)
}

// ScaleUpStatusProcessor reports the outcome of a loop's scale-up.
type ScaleUpStatusProcessor interface {
	Process(ctx context.Context, lc *LoopContext, status *ScaleUpStatus)
}

// Reason is a human reason with a message id and parameters, the shape the
// visibility log uses. Message is what pod events print.
type Reason struct {
	MessageID  string
	Parameters []string
	Message    string
	// Plugin is, for a node group rejected by the scheduler's predicates, the
	// plugin that refused: GKE's log format names it.
	Plugin string
}

// NewReason is a reason whose message is its single parameter, as upstream's
// skip reasons are.
func NewReason(messageID, message string) Reason {
	return Reason{MessageID: messageID, Parameters: []string{message}, Message: message}
}

// Message ids, as in upstream's visibility log.
const (
	MessageNodeGroupSkipped  = "no.scale.up.nodegroup.skipped"
	MessageNodeGroupRejected = "no.scale.up.nodegroup.rejected"
	MessagePodRefused        = "no.scale.up.pod.refused"
)

// ScaleUpResult says what a loop did about scale-up.
type ScaleUpResult int

const (
	// ScaleUpNotNeeded: no pod needed a new node.
	ScaleUpNotNeeded ScaleUpResult = iota
	// ScaleUpSuccessful: at least one group was increased.
	ScaleUpSuccessful
	// ScaleUpNoOptionsAvailable: pods needed nodes but no group could help.
	ScaleUpNoOptionsAvailable
	// ScaleUpError: increasing a group failed.
	ScaleUpError
)

// ScaleUpStatus is the full account of a loop's scale-up, for events, the
// visibility log, metrics and the status ConfigMap.
type ScaleUpStatus struct {
	Result ScaleUpResult
	// Increases are the groups grown.
	Increases []GroupIncrease
	// PodsTriggeredScaleUp are the pods the new nodes are for.
	PodsTriggeredScaleUp []*corev1.Pod
	// PodsRemainUnschedulable explain, per pod group, why no group helps.
	PodsRemainUnschedulable []NoScaleUpInfo
	// Refused are pods a pod list processor ruled out before simulation.
	Refused []RefusedPod
	// Error is set when Result is ScaleUpError.
	Error error
}

// GroupIncrease is one node group grown by a loop.
type GroupIncrease struct {
	Group   cloudprovider.NodeGroup
	Current int
	New     int
	Max     int
}

// NoScaleUpInfo explains why an equivalence group of pods triggers no scale-up.
type NoScaleUpInfo struct {
	// Pods are the group's pods; the first is its sample.
	Pods []*corev1.Pod
	// Rejected are groups whose template fails the scheduler's predicates for
	// the pods; Skipped are groups the pods fit but that may not grow, by group id.
	Rejected map[string][]Reason
	Skipped  map[string][]Reason
	// Gang is set when the pods are a gang's, which takes new nodes for all
	// its pods together or for none.
	Gang *gang.Gang
}

// ScaleDownStatusProcessor reports the outcome of a loop's scale-down.
type ScaleDownStatusProcessor interface {
	ProcessScaleDown(ctx context.Context, lc *LoopContext, status *ScaleDownStatus)
}

// ScaleDownStatus is the account of a loop's scale-down.
type ScaleDownStatus struct {
	// Removed are the nodes deleted this loop.
	Removed []NodeRemoval
	// Failed are removals that did not complete; their node was restored.
	Failed []FailedRemoval
	// Unneeded counts, per node group, the nodes that are candidates for
	// removal (waiting for the unneeded time, or removed this loop).
	Unneeded map[string]int
	// Kept explains why nodes that looked underutilized stay.
	Kept []KeptNode
}

// NodeRemoval is a node deleted with the pods evicted from it.
type NodeRemoval struct {
	Node    *corev1.Node
	GroupID string
	Evicted []*corev1.Pod
}

// FailedRemoval is a removal that failed, and why.
type FailedRemoval struct {
	NodeRemoval
	Err error
}

// KeptNode is a node that is not removed although it is underutilized.
type KeptNode struct {
	Node    *corev1.Node
	GroupID string
	Reason  Reason
}

// Scale-down message ids, in the visibility log's convention.
const (
	MessageNoScaleDownNode = "no.scale.down.node"
)
