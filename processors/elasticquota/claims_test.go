package elasticquota

import (
	"context"
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
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range []*resourcev1.ResourceClaim{deviceClaim("shared", 2), deviceClaim("one", 1), deviceClaim("two", 2)} {
		_ = claims.Add(c)
	}
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = classes.Add(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}})
	p.WithClaims(resourcelisters.NewResourceClaimLister(claims), resourcelisters.NewDeviceClassLister(classes))

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
