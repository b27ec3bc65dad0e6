// Package report turns live objects into the answers kubectl-quota prints: why a
// pod is pending, the ElasticQuotaTree in force with its figures, and the
// CapacityQuotas with their headroom. Its functions take typed objects and a
// clock and do no I/O, so every answer is tested without an API server. All
// quota arithmetic is the shared library's (quota/elastic, quota/capacity,
// quota/resources); this package only chooses inputs and words.
//
// The structs below are what `-o json` and `-o yaml` print. They are versioned
// by APIVersion: fields may be added, none renamed or removed. Quantities are
// canonical Kubernetes quantity strings; a max a quota node does not set is
// "unlimited"; times are RFC 3339.
package report

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	workloadv1beta1 "k8s.io/api/scheduling/v1beta1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// APIVersion versions the JSON/YAML shapes below.
const APIVersion = "kubectl-quota.quotascale.io/v1alpha1"

// Where figures come from.
const (
	// FromStatus: the bound pods as they are now, plus the part of usage that
	// the scheduler's status.quotas reports held (gangs' reservations,
	// reclaims' holds), which no pod shows.
	FromStatus = "pods and status"
	// FromPods: summed from the bound pods, because status was missing or stale.
	FromPods = "pods"
	// FromNodes: CapacityQuota usage summed from the registered nodes, as the
	// autoscaler counts it.
	FromNodes = "nodes"
)

// Unlimited is the max of a resource a quota node does not limit.
const Unlimited = "unlimited"

// Snapshot is everything kubectl-quota read from the cluster. Missing pieces are
// nil, with the reason in Notes; every answer is best-effort over what is there.
type Snapshot struct {
	Now time.Time
	// Trees are the ElasticQuotaTrees read (kube-system's, or all with --all).
	Trees []*schedulingv1beta1.ElasticQuotaTree
	// Pods are the bound, non-terminated pods, for usage and contributors.
	Pods []*corev1.Pod
	// Nodes are all nodes; NodesListed is false when they could not be read.
	Nodes       []*corev1.Node
	NodesListed bool
	Quotas      []*autoscalingv1beta1.CapacityQuota
	// Claims and DeviceClasses are every ResourceClaim and DeviceClass, for
	// the devices pods are charged; ClaimsListed is false when they could not
	// be read, and then pods count their requests alone.
	Claims        []*resourceapi.ResourceClaim
	DeviceClasses []*resourceapi.DeviceClass
	ClaimsListed  bool
	// Autoscaler is nil when its status ConfigMap was not found or unreadable.
	Autoscaler *AutoscalerStatus
	// Events are the events of the explained pod.
	Events []*corev1.Event
	// GangPods are the pods of the explained pod's namespace that may belong
	// to its gang, and PodGroup the Workload API PodGroup it names (nil when
	// it names none, or it was not found).
	GangPods []*corev1.Pod
	PodGroup *workloadv1beta1.PodGroup
	// Notes say what could not be read, e.g. "autoscaler status not found".
	Notes []string
}

// AutoscalerStatus is what the cluster autoscaler's status ConfigMap says.
type AutoscalerStatus struct {
	// Source names the ConfigMap, for messages.
	Source string
	// Time is when the autoscaler wrote it; zero when it did not parse.
	Time time.Time
	// Unhealthy says why the cluster is unhealthy, when it is: the autoscaler
	// then scales nothing. Empty when healthy.
	Unhealthy  string
	NodeGroups []NodeGroupStatus
}

// NodeGroupStatus is one node group as the autoscaler last saw it.
type NodeGroupStatus struct {
	Name                                 string
	MinSize, MaxSize, Target, Registered int
	// Unregistered are the group's instances without a registered node:
	// those that may still register and those past the provisioning time.
	Unregistered int
	// Backoff is why scale-ups of the group are backed off; empty when they are not.
	Backoff string
	// Unhealthy says why the group is unhealthy, when it is: the autoscaler
	// then does not grow it. Empty when healthy.
	Unhealthy string
}

// PodExplanation answers "why is this pod pending".
type PodExplanation struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Pod is namespace/name.
	Pod           string          `json:"pod"`
	Phase         corev1.PodPhase `json:"phase"`
	Node          string          `json:"node,omitempty"`
	NominatedNode string          `json:"nominatedNode,omitempty"`
	// Verdict is the one-line answer, e.g. `Pending: refused by ElasticQuotaTree
	// node "root.a.1" on cpu (used 20 + request 5 > max 20)`.
	Verdict string `json:"verdict"`
	// Requests are the pod's effective requests, as the scheduler computes them.
	Requests map[string]string `json:"requests"`
	// Gang is the gang the pod belongs to; nil for a pod in no gang. While the
	// gang is not whole, ElasticQuota judges the gang's request, not the pod's.
	Gang         *GangExplanation         `json:"gang,omitempty"`
	ElasticQuota *ElasticQuotaExplanation `json:"elasticQuota,omitempty"`
	Capacity     *CapacityExplanation     `json:"capacity,omitempty"`
	// Events are the scheduler's and autoscaler's events for the pod, newest last.
	Events []Event `json:"events"`
	// Notes say which data was missing and what was assumed instead.
	Notes []string `json:"notes,omitempty"`
}

// ElasticQuotaExplanation is the pod's leaf and ancestors in the tree in force.
type ElasticQuotaExplanation struct {
	// Tree is namespace/name of the tree in force.
	Tree string `json:"tree"`
	// FiguresFrom is FromStatus or FromPods.
	FiguresFrom string `json:"figuresFrom"`
	// Leaf is empty when no leaf lists the pod's namespace: it is not limited.
	Leaf     string `json:"leaf,omitempty"`
	Admitted bool   `json:"admitted"`
	// GangRequest is true when Request and the verdict are the pod's gang's:
	// the whole gang is admitted, or none of it.
	GangRequest bool `json:"gangRequest,omitempty"`
	// Message is the scheduler's refusal, e.g. `exceeded elastic quota "root.a.1":
	// cpu used 20, requested 5, max 20`; empty when admitted.
	Message string `json:"message,omitempty"`
	// Path is the leaf, then each ancestor up to the root.
	Path []QuotaNode `json:"path,omitempty"`
	// ContributorsOf is the binding quota node whose total Contributors explain.
	ContributorsOf string `json:"contributorsOf,omitempty"`
	// Contributors are the workloads whose bound pods make up that total, largest
	// first on the binding resource, then most recent first.
	Contributors []Contributor `json:"contributors,omitempty"`
	// MoreContributors counts the workloads left out by --top.
	MoreContributors int `json:"moreContributors,omitempty"`
}

// QuotaNode is one ElasticQuotaTree node with its figures.
type QuotaNode struct {
	Name           string         `json:"name"`
	Parent         string         `json:"parent,omitempty"`
	Depth          int            `json:"depth"`
	Namespaces     []string       `json:"namespaces,omitempty"`
	ResourceFlavor string         `json:"resourceFlavor,omitempty"`
	Resources      []NodeResource `json:"resources"`
}

// NodeResource is one resource of a quota node. Used and Borrowed are empty for
// a tree that is not in force (it governs nothing).
type NodeResource struct {
	Resource string `json:"resource"`
	Used     string `json:"used,omitempty"`
	Min      string `json:"min"`
	// Max is "unlimited" when the node does not limit the resource.
	Max      string `json:"max"`
	Borrowed string `json:"borrowed,omitempty"`
	// Request is the explained pod's request (explain only).
	Request string `json:"request,omitempty"`
	// Binding marks where used + request > max (explain only).
	Binding bool `json:"binding,omitempty"`
}

// Contributor is one workload's bound pods under the binding quota node.
type Contributor struct {
	Namespace string `json:"namespace"`
	// Workload is Kind/name of the pods' controller (a ReplicaSet's Deployment
	// when its name says so), or Pod/name for a bare pod.
	Workload string            `json:"workload"`
	Pods     int               `json:"pods"`
	Requests map[string]string `json:"requests"`
	// Newest is when the newest of these pods was created: what most recently
	// raised the total.
	Newest time.Time `json:"newest"`
}

// CapacityExplanation is what the autoscaler may add for the pod.
type CapacityExplanation struct {
	// AutoscalerStatus names the status ConfigMap read, or says why none was.
	AutoscalerStatus string `json:"autoscalerStatus"`
	// StatusTime is when the autoscaler wrote it.
	StatusTime *time.Time `json:"statusTime,omitempty"`
	// NodeGroups are all node groups, with whether each can host the pod and grow.
	NodeGroups []NodeGroupFit `json:"nodeGroups"`
	// Quotas are the CapacityQuotas matching the groups able to host the pod,
	// or, when no group's labels are known, those whose selector the pod's
	// nodeSelector satisfies (figures from status.used).
	Quotas []CapacityQuotaView `json:"quotas,omitempty"`
}

// NodeGroupFit is one node group seen from the pod.
type NodeGroupFit struct {
	Name       string `json:"name"`
	MinSize    int    `json:"minSize"`
	MaxSize    int    `json:"maxSize"`
	Target     int    `json:"target"`
	Registered int    `json:"registered"`
	// Upcoming are the nodes asked for and not registered yet, as the
	// autoscaler counts them: target - registered, and at least the
	// instances without a registered node.
	Upcoming int `json:"upcoming"`
	// Template is the node whose labels, taints and capacity stand for the
	// group; empty when the group has no registered node.
	Template string `json:"template,omitempty"`
	// CanHost is false when the template does not fit the pod, or is unknown.
	CanHost bool `json:"canHost"`
	// Why says why the group cannot host the pod.
	Why string `json:"why,omitempty"`
	// CanGrow is true when one more node is allowed; Blocked says what stops it.
	CanGrow bool     `json:"canGrow"`
	Blocked []string `json:"blocked,omitempty"`
	// Quotas are the valid CapacityQuotas matching the template, sorted.
	Quotas []string `json:"quotas,omitempty"`
}

// CapacityReport is `kubectl quota capacity`.
type CapacityReport struct {
	Kind       string              `json:"kind"`
	APIVersion string              `json:"apiVersion"`
	Quotas     []CapacityQuotaView `json:"quotas"`
	Notes      []string            `json:"notes,omitempty"`
}

// CapacityQuotaView is one CapacityQuota with its figures.
type CapacityQuotaView struct {
	Name     string `json:"name"`
	Selector string `json:"selector"`
	// Valid is the quota's validity as the autoscaler judges it; only valid
	// quotas are enforced. Message is "CapacityQuota is valid" or the problems.
	Valid   bool   `json:"valid"`
	Message string `json:"message"`
	// UsedFrom is FromNodes, or FromStatus when nodes could not be read.
	UsedFrom   string          `json:"usedFrom"`
	NodeGroups []string        `json:"nodeGroups,omitempty"`
	Resources  []QuotaResource `json:"resources"`
}

// QuotaResource is one limited resource of a CapacityQuota.
type QuotaResource struct {
	Resource string `json:"resource"`
	Used     string `json:"used"`
	// Upcoming is what nodes asked for and not registered add; empty when unknown.
	Upcoming string `json:"upcoming,omitempty"`
	Limit    string `json:"limit"`
	// Headroom is limit - used - upcoming, never negative.
	Headroom string `json:"headroom"`
}

// TreeReport is `kubectl quota tree`.
type TreeReport struct {
	Kind       string     `json:"kind"`
	APIVersion string     `json:"apiVersion"`
	Trees      []TreeView `json:"trees"`
	Notes      []string   `json:"notes,omitempty"`
}

// TreeView is one ElasticQuotaTree.
type TreeView struct {
	// Tree is namespace/name.
	Tree               string      `json:"tree"`
	InForce            bool        `json:"inForce"`
	Generation         int64       `json:"generation"`
	ObservedGeneration int64       `json:"observedGeneration"`
	Conditions         []Condition `json:"conditions,omitempty"`
	// FiguresFrom is FromStatus or FromPods for the tree in force, else empty.
	FiguresFrom string `json:"figuresFrom,omitempty"`
	// Resources are the resources the tree limits, sorted.
	Resources []string    `json:"resources"`
	Nodes     []QuotaNode `json:"nodes"`
	Notes     []string    `json:"notes,omitempty"`
}

// Condition is a status condition, without its timestamps.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Event is one event of the explained pod.
type Event struct {
	// Time is the last occurrence.
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	From    string    `json:"from"`
	Count   int32     `json:"count"`
	Message string    `json:"message"`
}

// GangExplanation is the gang of the explained pod: a Workload API PodGroup
// with a gang policy, or ACK's gang labels, read as the scheduler reads them.
type GangExplanation struct {
	// Gang is namespace/name; Source is "PodGroup" or "Labels" (ACK's).
	Gang   string `json:"gang"`
	Source string `json:"source"`
	// MinCount is how many pods must run together; 0 when Problem is set.
	MinCount int32 `json:"minCount,omitempty"`
	// Problem says why the gang cannot be read, e.g. a missing PodGroup or a
	// bad min-available label: the scheduler keeps the pod waiting.
	Problem string `json:"problem,omitempty"`
	// Pods counts the gang's live pods, Bound those bound to a node.
	Pods  int `json:"pods"`
	Bound int `json:"bound"`
	// Whole is true when the gang's first MinCount pods are bound: it runs,
	// and each further pod is judged alone.
	Whole bool `json:"whole"`
	// Request is what the gang still asks of its quota, as the scheduler
	// asks it for its first pod to reach the quota check: the requests of
	// its first MinCount pods that are not bound, and the explained pod's
	// own requests StandIns times, for pods not created yet. Empty when Whole.
	Request  map[string]string `json:"request,omitempty"`
	StandIns int               `json:"standIns,omitempty"`
	// Scheduled is the PodGroup's PodGroupInitiallyScheduled condition, as
	// kube-scheduler writes it.
	Scheduled *Condition `json:"scheduled,omitempty"`
	// Members are the gang's live pods in the order the gang counts them:
	// bound first, then oldest first.
	Members []GangMember `json:"members,omitempty"`
}

// GangMember is one pod of a gang.
type GangMember struct {
	Pod   string          `json:"pod"`
	Node  string          `json:"node,omitempty"`
	Phase corev1.PodPhase `json:"phase"`
	// Counted is true for the first MinCount members, those the gang's
	// request is made of.
	Counted bool `json:"counted"`
}
