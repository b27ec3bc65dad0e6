package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/gang"
)

const gpuDevices = "gpu.example.com.deviceclass.resource.k8s.io/devices"

// deviceClaim is a claim for one device of class gpu.example.com, allocated
// when allocated is set; owner, when set, is the pod it was generated for.
func deviceClaim(namespace, name string, owner types.UID, allocated bool) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("claim-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	if owner != "" {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: owner, Controller: ptr.To(true)}}
	}
	if allocated {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-" + name},
		}}}
	}
	return c
}

// deviceTree is a tree whose leaf root.team (namespace team) may use 2
// devices of class gpu.example.com.
func deviceTree() *schedulingv1beta1.ElasticQuotaTree {
	return &schedulingv1beta1.ElasticQuotaTree{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "tree", Generation: 1, CreationTimestamp: ago(time.Hour)},
		Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: schedulingv1beta1.ElasticQuotaSpec{
			Name: "root", Min: list("cpu", "100", gpuDevices, "10"), Max: list("cpu", "100", gpuDevices, "10"),
			Children: []schedulingv1beta1.ElasticQuotaSpec{{Name: "root.team", Namespaces: []string{"team"},
				Max: list("cpu", "100", gpuDevices, "2")}},
		}},
	}
}

// withTemplateClaim gives pod a claim from a template, generated as name.
func withTemplateClaim(pod *corev1.Pod, name string) *corev1.Pod {
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")})
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To(name)})
	return pod
}

func withSharedClaim(pod *corev1.Pod, name string) *corev1.Pod {
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To(name)})
	return pod
}

// TestDevicesCountInTheTree: kubectl-quota charges pods' claims as the
// scheduler does. Three bound pods use two devices (one claim of its own, one
// claim shared by two pods, charged once); a pending pod's claim then finds
// its leaf's device max of 2 reached. Without claims, devices were left out:
// the leaf showed no device used and the pending pod was told it fits.
func TestDevicesCountInTheTree(t *testing.T) {
	tree := deviceTree()
	bound := replicaPods("team", "train", 3, "1", "node-a", time.Minute)
	withTemplateClaim(bound[0], "train-0-gpu")
	withSharedClaim(bound[1], "shared")
	withSharedClaim(bound[2], "shared")
	pending := withTemplateClaim(replicaPods("team", "eval", 1, "1", "", time.Second)[0], "eval-0-gpu")
	snap := Snapshot{
		Now: now, Trees: treesOf(tree), Pods: bound, ClaimsListed: true,
		Claims: []*resourceapi.ResourceClaim{
			deviceClaim("team", "train-0-gpu", bound[0].UID, true),
			deviceClaim("team", "shared", "", true),
			deviceClaim("team", "eval-0-gpu", pending.UID, false),
		},
		DeviceClasses: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}},
	}

	used := func(r TreeReport) map[string]string {
		out := map[string]string{}
		for _, n := range r.Trees[0].Nodes {
			for _, res := range n.Resources {
				if res.Resource == gpuDevices {
					out[n.Name] = res.Used
				}
			}
		}
		return out
	}
	if diff := cmp.Diff(map[string]string{"root": "2", "root.team": "2"}, used(Tree(snap))); diff != "" {
		t.Errorf("devices used, from the bound pods' claims (-want +got):\n%s", diff)
	}
	e := Explain(snap, pending, DefaultTop)
	if e.ElasticQuota == nil || e.ElasticQuota.Admitted || !strings.Contains(e.ElasticQuota.Message, gpuDevices) {
		t.Errorf("the pending pod's claim: want refused on %s, got %+v", gpuDevices, e.ElasticQuota)
	}

	// When claims cannot be read, pods count their requests alone.
	blind := snap
	blind.ClaimsListed, blind.Claims, blind.DeviceClasses = false, nil, nil
	if diff := cmp.Diff(map[string]string{"root": "0", "root.team": "0"}, used(Tree(blind))); diff != "" {
		t.Errorf("devices used without claims (-want +got):\n%s", diff)
	}
}

// TestExplainGangCountsDevices: a gang's request counts its members' devices
// as the scheduler's does. Three pending members with a device each ask 3 of
// their leaf's 2 devices as a gang, though each alone fits.
func TestExplainGangCountsDevices(t *testing.T) {
	tree := deviceTree()
	pods := replicaPods("team", "train", 3, "1", "", time.Minute)
	var claims []*resourceapi.ResourceClaim
	for i, p := range pods {
		p.Labels[gang.LabelName], p.Labels[gang.LabelMinAvailable] = "train", "3"
		name := fmt.Sprintf("train-%d-gpu", i)
		withTemplateClaim(p, name)
		claims = append(claims, deviceClaim("team", name, p.UID, false))
	}
	snap := Snapshot{Now: now, Trees: treesOf(tree), Pods: pods, GangPods: pods, ClaimsListed: true, Claims: claims,
		DeviceClasses: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}}}
	e := Explain(snap, pods[0], DefaultTop)
	if e.Gang == nil || e.Gang.Request[gpuDevices] != "3" {
		t.Fatalf("the gang's request: want 3 %s, got %+v", gpuDevices, e.Gang)
	}
	if e.ElasticQuota == nil || e.ElasticQuota.Admitted || !strings.Contains(e.ElasticQuota.Message, gpuDevices) {
		t.Errorf("the gang: want refused on %s, got %+v", gpuDevices, e.ElasticQuota)
	}
}
