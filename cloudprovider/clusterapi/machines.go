package clusterapi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
)

// Names Cluster API and the upstream cluster autoscaler agree on. The autoscaler
// annotations are upstream's, so existing MachineDeployments work unchanged.
const (
	// APIGroup is Cluster API's API group.
	APIGroup = "cluster.x-k8s.io"
	// DefaultAPIVersion is the version Cluster API v1.14 stores.
	DefaultAPIVersion = "v1beta2"

	// NodeGroupMinSizeAnnotation and NodeGroupMaxSizeAnnotation, both present on
	// a MachineDeployment or a MachineSet, make it a node group.
	NodeGroupMinSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	NodeGroupMaxSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	// DeleteMachineAnnotation makes a MachineSet delete that machine first when it
	// scales down.
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	// MachineAnnotation and ClusterNamespaceAnnotation are set by Cluster API on
	// a workload cluster's nodes: the machine's name and namespace.
	MachineAnnotation          = "cluster.x-k8s.io/machine"
	ClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
	// DeploymentNameLabel, SetNameLabel and PoolNameLabel are set on machines
	// by their owners.
	DeploymentNameLabel = "cluster.x-k8s.io/deployment-name"
	SetNameLabel        = "cluster.x-k8s.io/set-name"
	PoolNameLabel       = "cluster.x-k8s.io/pool-name"
	// ClusterNameLabel names the Cluster an object belongs to.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// PausedAnnotation on a scalable resource stops Cluster API reconciling
	// it; the autoscaler then leaves it out, as upstream does.
	PausedAnnotation = "cluster.x-k8s.io/paused"
	// InsufficientResourcesMachineError is Cluster API's failure reason for a
	// machine the infrastructure has no capacity for (a stockout, an exhausted
	// cloud quota).
	InsufficientResourcesMachineError = "InsufficientResourcesMachineError"

	// pendingIDPrefix makes the instance ID of a machine without a provider ID,
	// clusterapi-pending://NAMESPACE/NAME: the autoscaler needs an ID for every
	// instance, and no node ever has this one.
	pendingIDPrefix = "clusterapi-pending://"

	kindMachineDeployment = "MachineDeployment"
	kindMachineSet        = "MachineSet"
	kindMachinePool       = "MachinePool"
	kindMachine           = "Machine"
)

func key(u *unstructured.Unstructured) types.NamespacedName {
	return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
}

// instanceID is the machine's provider ID, or a pending ID until it has one.
func instanceID(m *unstructured.Unstructured) string {
	if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" {
		return id
	}
	return pendingIDPrefix + m.GetNamespace() + "/" + m.GetName()
}

// refGroup is the API group of an infrastructureRef: a v1beta2 contract
// reference names it, a v1beta1 ObjectReference has it in its apiVersion.
func refGroup(ref map[string]string) string {
	if g := ref["apiGroup"]; g != "" {
		return g
	}
	return schema.FromAPIVersionAndKind(ref["apiVersion"], ref["kind"]).Group
}

// withInfrastructureProviderID is m, or, while m has no provider ID and its
// infrastructure machine has one, a copy of m with that provider ID. Cluster
// API's Machine controller copies the provider ID over only after the
// infrastructure machine is provisioned, and the node may register first.
// Without this, that node would match none of the group's instances: the
// node would count as registered while its machine still counted as an
// unregistered instance, the same node twice in the group's upcoming nodes
// and in every capacity limit's usage. An infrastructure kind the autoscaler
// cannot read leaves the pending ID, as before.
func (p *Provider) withInfrastructureProviderID(m *unstructured.Unstructured) *unstructured.Unstructured {
	if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" || p.informers == nil {
		return m
	}
	ref, found, _ := unstructured.NestedStringMap(m.Object, "spec", "infrastructureRef")
	if !found || ref["kind"] == "" || ref["name"] == "" {
		return m
	}
	infra, err := p.informers.template(refGroup(ref), ref["kind"], m.GetNamespace(), ref["name"], false)
	if err != nil || infra == nil {
		if err != nil {
			klog.FromContext(p.ctx).V(5).Info("No provider ID from the infrastructure machine", "machine", klog.KObj(m), "reason", err.Error())
		}
		return m
	}
	id, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID")
	if id == "" {
		return m
	}
	out := m.DeepCopy()
	if err := unstructured.SetNestedField(out.Object, id, "spec", "providerID"); err != nil {
		return m
	}
	return out
}

// parsePendingID inverts instanceID for machines without a provider ID.
func parsePendingID(id string) (types.NamespacedName, bool) {
	rest, ok := strings.CutPrefix(id, pendingIDPrefix)
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func hasNodeRef(m *unstructured.Unstructured) bool {
	name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	return name != ""
}

func isDeleting(m *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	return m.GetDeletionTimestamp() != nil || phase == "Deleting" || phase == "Deleted"
}

// failure returns the machine's failure reason and message. v1beta2 keeps them
// under status.deprecated.v1beta1; v1beta1 had them in status.
func failure(m *unstructured.Unstructured) (reason, message string) {
	for _, path := range [][]string{{"status", "deprecated", "v1beta1"}, {"status"}} {
		r, _, _ := unstructured.NestedString(m.Object, append(path, "failureReason")...)
		msg, _, _ := unstructured.NestedString(m.Object, append(path, "failureMessage")...)
		if r != "" || msg != "" {
			return r, msg
		}
	}
	return "", ""
}

// machineStatus maps a machine to the autoscaler's view of an instance:
//   - being deleted (deletionTimestamp, phase Deleting or Deleted): Deleting;
//   - failed (phase Failed or a failure reason) before a node registered:
//     Creating with ErrorInfo, which makes the autoscaler back off the group and
//     delete the machine; InsufficientResourcesMachineError is an
//     out-of-resources error, any other reason another error;
//   - Running or Updating, or a node registered: Running;
//   - otherwise (Pending, Provisioning, Provisioned, Unknown, no phase): Creating.
func machineStatus(m *unstructured.Unstructured) *cloudprovider.InstanceStatus {
	if isDeleting(m) {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	}
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	reason, message := failure(m)
	if (phase == "Failed" || reason != "" || message != "") && !hasNodeRef(m) {
		if reason == "" {
			reason = "ProvisioningFailed"
		}
		if message == "" {
			message = fmt.Sprintf("machine %s/%s failed to provision", m.GetNamespace(), m.GetName())
		}
		class := cloudprovider.OtherErrorClass
		if reason == InsufficientResourcesMachineError {
			class = cloudprovider.OutOfResourcesErrorClass
		}
		return &cloudprovider.InstanceStatus{
			State: cloudprovider.InstanceCreating,
			ErrorInfo: &cloudprovider.InstanceErrorInfo{
				ErrorClass:   class,
				ErrorCode:    reason,
				ErrorMessage: message,
			},
		}
	}
	if phase == "Running" || phase == "Updating" || hasNodeRef(m) {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	}
	return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
}

// owner returns the name of the object's Cluster API owner of kind, or "".
func owner(u *unstructured.Unstructured, kind string) string {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == kind && strings.HasPrefix(ref.APIVersion, APIGroup+"/") {
			return ref.Name
		}
	}
	return ""
}
