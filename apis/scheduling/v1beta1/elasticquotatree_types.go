package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// EnforcedNamespace is the only namespace whose tree is in force, as in ACK.
	EnforcedNamespace = "kube-system"

	// AttributeResourceFlavors names the ResourceFlavor that pins a quota node, and
	// the subtree below it, to the flavor's nodes.
	AttributeResourceFlavors = "resourceflavors"

	// MaxDepth is how deep the CRD schema nests quota nodes; the root is depth 1.
	// A structural schema cannot recurse, so the schema is unrolled to this depth
	// and a node at this depth may not have children.
	MaxDepth = 8

	// ConditionValid says whether the spec passed semantic validation. When False,
	// the message lists every problem and the last valid tree stays in force.
	ConditionValid = "Valid"
	// ConditionActive says whether this tree is the one the scheduler enforces.
	ConditionActive = "Active"

	// ReasonValid, ReasonInvalid, ReasonEnforced, ReasonIgnored and ReasonSuperseded
	// are the reasons of the conditions above.
	ReasonValid      = "Valid"
	ReasonInvalid    = "Invalid"
	ReasonEnforced   = "Enforced"
	ReasonIgnored    = "NotInKubeSystem"
	ReasonSuperseded = "Superseded"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=eqt
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, ACK capacity scheduling API served by quotascale"
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ElasticQuotaTree is a hierarchy of quota nodes with a guaranteed min and a max
// per resource; namespaces hang off the leaves. Only a tree in kube-system is in
// force.
type ElasticQuotaTree struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ElasticQuotaTreeSpec `json:"spec,omitempty"`

	// +optional
	Status ElasticQuotaTreeStatus `json:"status,omitempty"`
}

// ElasticQuotaTreeSpec holds the root quota node.
type ElasticQuotaTreeSpec struct {
	Root ElasticQuotaSpec `json:"root"`
}

// ElasticQuotaSpec is one quota node.
//
// The API server checks the rules that look at one node alone and cost little
// (CEL: a structural schema cannot recurse, so the node schema is unrolled
// MaxDepth levels and the CRD's CEL cost budget is shared by every level).
// The scheduler's validating admission webhook checks the rest.
// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="name must not be empty"
// +kubebuilder:validation:XValidation:rule="!has(self.children) || size(self.children) == 0 || !has(self.namespaces) || size(self.namespaces) == 0",messageExpression=`'quota node "' + self.name + '": only leaf nodes may list namespaces, found: ' + self.namespaces.join(', ')`
type ElasticQuotaSpec struct {
	// Name identifies the node; it is unique in the tree.
	Name string `json:"name"`

	// Namespaces whose pods are charged to this node. Only leaves carry
	// namespaces, and a namespace belongs to one leaf.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// Attributes are ACK's free-form settings; "resourceflavors" names a
	// kueue.x-k8s.io ResourceFlavor whose nodeLabels pods of this subtree must
	// land on.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`

	// Min is guaranteed. A resource missing here is zero.
	// +optional
	Min corev1.ResourceList `json:"min,omitempty"`

	// Max is the ceiling, borrowing included. A resource missing here is
	// unlimited.
	// +optional
	Max corev1.ResourceList `json:"max,omitempty"`

	// Children are the sub-quotas. The CRD schema nests them MaxDepth levels deep.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=array
	// +kubebuilder:pruning:PreserveUnknownFields
	Children []ElasticQuotaSpec `json:"children,omitempty"`
}

// ElasticQuotaTreeStatus is written by the scheduler's leader.
type ElasticQuotaTreeStatus struct {
	// ObservedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Valid and Active.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Quotas are the figures of every quota node of the tree in force, in
	// depth-first order.
	// +listType=map
	// +listMapKey=name
	// +optional
	Quotas []QuotaNodeStatus `json:"quotas,omitempty"`

	// QuotasTime is when the scheduler measured quotas' figures. They are
	// written every few seconds at most, and held changes by the moment, so
	// a reader tells from it how old they are.
	// +optional
	QuotasTime *metav1.Time `json:"quotasTime,omitempty"`

	// LastValid is the newest generation of this tree's spec that passed
	// validation, as the scheduler enforced it. While the spec is invalid (an
	// edit that got past write-time validation, say with the webhook down), the
	// scheduler, the autoscaler and kubectl-quota enforce and show this
	// generation instead, across restarts.
	// +optional
	LastValid *TreeGeneration `json:"lastValid,omitempty"`
}

// TreeGeneration is one generation of a tree's spec.
type TreeGeneration struct {
	// Generation is the metadata.generation the spec had.
	Generation int64 `json:"generation"`
	// Spec is that generation's spec. Only the scheduler writes it, and every
	// reader validates it again before use, so the schema does not repeat the
	// spec's.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec ElasticQuotaTreeSpec `json:"spec"`
}

// QuotaNodeStatus is the accounting of one quota node.
type QuotaNodeStatus struct {
	Name string `json:"name"`
	// Parent is empty for the root.
	// +optional
	Parent string `json:"parent,omitempty"`
	// Used is the sum of the requests of the bound pods in the subtree.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// +optional
	Min corev1.ResourceList `json:"min,omitempty"`
	// +optional
	Max corev1.ResourceList `json:"max,omitempty"`
	// Borrowed is how far used is above min.
	// +optional
	Borrowed corev1.ResourceList `json:"borrowed,omitempty"`
	// Lent is the part of min left idle, which other quota nodes may borrow.
	// +optional
	Lent corev1.ResourceList `json:"lent,omitempty"`
	// Held is the part of used that no bound pod shows: quota the scheduler
	// reserved for pods being bound and for admitted gangs still filling
	// up, and quota held for a reclaim's preemptor. The rest of used is what
	// the bound pods request, which a reader can sum from the pods as they
	// are now; quotasTime says when held was measured.
	// +optional
	Held corev1.ResourceList `json:"held,omitempty"`
}

// +kubebuilder:object:root=true

// ElasticQuotaTreeList is a list of ElasticQuotaTrees.
type ElasticQuotaTreeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ElasticQuotaTree `json:"items"`
}
