package clusterapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotascale/quotascale/cloudprovider"
)

func machine(name string, spec, status map[string]any) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       "Machine",
		"metadata":   map[string]any{"name": name, "namespace": "ns"},
	}
	if spec != nil {
		obj["spec"] = spec
	}
	if status != nil {
		obj["status"] = status
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestMachineStatus(t *testing.T) {
	nodeRef := map[string]any{"name": "node-1"}
	deleting := machine("m", nil, map[string]any{"phase": "Running"})
	deleting.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2026-11-30T08:00:00Z"
	creating := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	running := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	failedWith := func(code, message string) *cloudprovider.InstanceStatus {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: code, ErrorMessage: message,
		}}
	}
	for _, tc := range []struct {
		name    string
		machine *unstructured.Unstructured
		want    *cloudprovider.InstanceStatus
	}{
		{"no status", machine("m", nil, nil), creating},
		{"pending", machine("m", nil, map[string]any{"phase": "Pending"}), creating},
		{"provisioning", machine("m", nil, map[string]any{"phase": "Provisioning"}), creating},
		{"provisioned", machine("m", nil, map[string]any{"phase": "Provisioned"}), creating},
		{"running", machine("m", nil, map[string]any{"phase": "Running", "nodeRef": nodeRef}), running},
		{"updating", machine("m", nil, map[string]any{"phase": "Updating"}), running},
		{"node registered, phase lagging", machine("m", nil, map[string]any{"phase": "Provisioned", "nodeRef": nodeRef}), running},
		{"deleting phase", machine("m", nil, map[string]any{"phase": "Deleting"}), &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}},
		{"deletion timestamp", deleting, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}},
		{"failed, v1beta2 deprecated fields", machine("m", nil, map[string]any{"phase": "Failed", "deprecated": map[string]any{"v1beta1": map[string]any{
			"failureReason": "CreateError", "failureMessage": "instance type not available in zone",
		}}}), failedWith("CreateError", "instance type not available in zone")},
		{"failed, no reason", machine("m", nil, map[string]any{"phase": "Failed"}), failedWith("ProvisioningFailed", "machine ns/m failed to provision")},
		{"failure reason without phase", machine("m", nil, map[string]any{"failureReason": "InsufficientCapacity"}), failedWith("InsufficientCapacity", "machine ns/m failed to provision")},
		{"failed after its node registered", machine("m", nil, map[string]any{"phase": "Failed", "nodeRef": nodeRef}), running},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, machineStatus(tc.machine)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstanceIDs(t *testing.T) {
	withID := machine("a", map[string]any{"providerID": "aws:///us-east-1a/i-0123"}, nil)
	if got := instanceID(withID); got != "aws:///us-east-1a/i-0123" {
		t.Errorf("instanceID = %q", got)
	}
	pending := machine("b", nil, nil)
	id := instanceID(pending)
	if id != "clusterapi-pending://ns/b" {
		t.Errorf("pending instanceID = %q", id)
	}
	if k, ok := parsePendingID(id); !ok || k.Namespace != "ns" || k.Name != "b" {
		t.Errorf("parsePendingID(%q) = %v, %v", id, k, ok)
	}
	for _, bad := range []string{"", "clusterapi-pending://ns", "clusterapi-pending:///b", "kwok://g/n"} {
		if _, ok := parsePendingID(bad); ok {
			t.Errorf("parsePendingID(%q) accepted", bad)
		}
	}
}
