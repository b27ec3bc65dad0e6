package elasticquota

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

const gpuDevices corev1.ResourceName = "gpu.example.com.deviceclass.resource.k8s.io/devices"

func deviceClaim(name string, devices int64) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "namespace1", Name: name, UID: types.UID("claim-" + name)}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: devices}}}
	return c
}

func claiming(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return p
}

// withDevices makes p read claims and the DeviceClass gpu.example.com.
func withDevices(p *Processor, claims ...*resourcev1.ResourceClaim) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range claims {
		_ = indexer.Add(c)
	}
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = classes.Add(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}})
	p.WithClaims(resourcelisters.NewResourceClaimLister(indexer), resourcelisters.NewDeviceClassLister(classes))
}

// The autoscaler charges devices as the scheduler does: a claim shared with a
// running pod costs nothing more, a claim one pending pod was admitted with
// costs nothing more to the next, and a claim past the device max is refused.
func TestDevicesChargedAsTheSchedulerCharges(t *testing.T) {
	tr := tree("0", "40", 1)
	tr.Spec.Root.Children[0].Max[gpuDevices] = resource.MustParse("3")
	bound := claiming(pod("bound", "n1", "", 1), "shared")
	pending := []*corev1.Pod{
		claiming(pod("same-claim", "", "", 2), "shared"),
		claiming(pod("new-claim", "", "", 3), "one"),
		claiming(pod("new-claim-again", "", "", 4), "one"),
		claiming(pod("too-many", "", "", 5), "two"),
	}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tr}, append([]*corev1.Pod{bound}, pending...))
	withDevices(p, deviceClaim("shared", 2), deviceClaim("one", 1), deviceClaim("two", 2))

	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	var keptNames, refusedNames []string
	for _, k := range kept {
		keptNames = append(keptNames, k.Name)
	}
	for _, r := range refused {
		refusedNames = append(refusedNames, r.Pod.Name)
	}
	if diff := cmp.Diff([]string{"same-claim", "new-claim", "new-claim-again"}, keptNames); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"too-many"}, refusedNames); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
}

// TestGangHoldsItsSharedClaims: a gang admitted with a claim its members
// share holds it, as the scheduler charges it once: a pod after the gang
// naming the same claim asks for no device again.
func TestGangHoldsItsSharedClaims(t *testing.T) {
	tr := tree("0", "40", 1)
	tr.Spec.Root.Children[0].Max[gpuDevices] = resource.MustParse("2")
	var pending []*corev1.Pod
	for i := range 2 {
		p := claiming(pod(fmt.Sprintf("train-%d", i), "", "", int64(i)), "shared")
		p.Labels = map[string]string{gang.LabelName: "train", gang.LabelMinAvailable: "2"}
		pending = append(pending, p)
	}
	pending = append(pending, claiming(pod("after", "", "", 5), "shared"))
	for _, p := range pending {
		p.Status.Phase = corev1.PodPending
	}
	p, _ := newProcessor(t, []*schedulingv1beta1.ElasticQuotaTree{tr}, pending)
	withDevices(p, deviceClaim("shared", 2))

	kept, refused, err := p.Process(context.Background(), &processors.LoopContext{}, pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 || len(refused) != 0 {
		var names []string
		for _, r := range refused {
			names = append(names, r.Pod.Name+": "+r.Reason.Message)
		}
		t.Errorf("kept %d, refused %v; want the gang and the pod after it kept", len(kept), names)
	}
}
