package capacityquota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
)

const gpuDevices = "gpu.example.com.deviceclass.resource.k8s.io/devices"

func gpuSlice(node string, generation int64, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gpu-%d", node, generation)}}
	s.Spec.Driver = "gpu.example.com"
	s.Spec.NodeName = ptr.To(node)
	s.Spec.Pool = resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

func gpuClass(extended string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	c.Spec.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

func deviceQuota(limits ...string) *autoscalingv1beta1.CapacityQuota {
	q := seedQuota("64")
	for i := 0; i+1 < len(limits); i += 2 {
		q.Spec.Limits.Resources[autoscalingv1beta1.ResourceName(limits[i])] = resource.MustParse(limits[i+1])
	}
	return q
}

// devicesProcessor is a processor watching slices and classes through real
// informers over a fake clientset, synced before it returns.
func devicesProcessor(t *testing.T, quota *autoscalingv1beta1.CapacityQuota, objects ...any) (*Processor, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	ctx := context.Background()
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *resourcev1.ResourceSlice:
			_, err = client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *resourcev1.DeviceClass:
			_, err = client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		return []*autoscalingv1beta1.CapacityQuota{quota}, nil
	}, nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	slices, classes := factory.Resource().V1().ResourceSlices().Informer(), factory.Resource().V1().DeviceClasses().Informer()
	if err := p.WatchDevices(slices, classes); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, slices.HasSynced, classes.HasSynced) {
		t.Fatal("informers did not sync")
	}
	return p, client
}

func usedOf(t *testing.T, p *Processor) autoscalingv1beta1.ResourceList {
	t.Helper()
	statuses := p.Statuses()
	if len(statuses) != 1 || !statuses[0].Quota.Valid {
		t.Fatalf("statuses = %+v", statuses)
	}
	return desiredStatus(statuses[0].Object, statuses[0].Quota, statuses[0].DeviceClassMissing, statuses[0].DeviceNotes).Used.Resources
}

// TestDevicesCountAsCapacity: a node's devices of the current generation
// count in status.used, a template's devices in the scale-up check, and a
// class's extended resource name counts the same devices once.
func TestDevicesCountAsCapacity(t *testing.T) {
	quota := deviceQuota(gpuDevices, "4", "example.com/gpu", "4")
	p, _ := devicesProcessor(t, quota, gpuClass("example.com/gpu"), gpuSlice("registered-1", 1, 3), gpuSlice("registered-1", 2, 2), gpuSlice("template", 1, 2))
	p.onNode(seedNode("registered-1"), false)
	g := group{id: "grp"}
	template := &cloudprovider.NodeInfo{Node: seedNode("template"), ResourceSlices: []*resourcev1.ResourceSlice{gpuSlice("template", 1, 2)}}
	lc := &processors.LoopContext{Now: time.Unix(0, 0), Groups: []cloudprovider.NodeGroup{g}, Templates: map[string]*cloudprovider.NodeInfo{"grp": template}}
	ctx := context.Background()
	if err := p.StartLoop(ctx, lc); err != nil {
		t.Fatal(err)
	}
	want := autoscalingv1beta1.ResourceList{"cpu": resource.MustParse("2"), gpuDevices: resource.MustParse("2"), "example.com/gpu": resource.MustParse("2")}
	if diff := cmp.Diff(want, usedOf(t, p), quantityEqual); diff != "" {
		t.Errorf("status.used (-want +got):\n%s", diff)
	}
	// 4 devices, 2 used, 2 per new node: one more.
	n, reasons := p.Headroom(ctx, lc, g, template.Node, 3)
	wantReasons := []processors.Reason{processors.NewReason(processors.MessageNodeGroupSkipped,
		`exceeded quota: "CapacityQuota/test-capacityquota", resources: example.com/gpu, `+gpuDevices)}
	if n != 1 || !cmp.Equal(wantReasons, reasons) {
		t.Errorf("headroom = %d %+v, want 1 %+v", n, reasons, wantReasons)
	}
}

// TestDevicesFollowSlicesAndClasses: a node's count follows its slices, and a
// class created after the quota starts counting the devices it selects.
func TestDevicesFollowSlicesAndClasses(t *testing.T) {
	quota := deviceQuota(gpuDevices, "8")
	p, client := devicesProcessor(t, quota, gpuSlice("registered-1", 1, 2))
	p.onNode(seedNode("registered-1"), false)
	ctx := context.Background()
	lc := &processors.LoopContext{Now: time.Unix(0, 0)}
	loop := func() string {
		t.Helper()
		if err := p.StartLoop(ctx, lc); err != nil {
			t.Fatal(err)
		}
		q := usedOf(t, p)[gpuDevices]
		return q.String()
	}
	if got := loop(); got != "0" {
		t.Errorf("devices without their class = %s, want 0", got)
	}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, gpuClass(""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return loop() == "2" })
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, gpuSlice("registered-1", 2, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return loop() == "3" })
	if err := client.ResourceV1().ResourceSlices().Delete(ctx, gpuSlice("registered-1", 2, 3).Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return loop() == "2" })
}

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// waitFor polls cond until it holds: informers deliver the client's writes
// asynchronously.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("condition never held: %v", err)
	}
}

// TestDeviceClassConditions: a limit on a class the cluster does not have is
// accepted, counts nothing and says so; a class whose selector fails says
// which devices it does not count; a quota without device limits has no
// such condition.
func TestDeviceClassConditions(t *testing.T) {
	broken := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "broken.example.com"}}
	broken.Spec.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "x"`}}}
	for _, tc := range []struct {
		name   string
		quota  *autoscalingv1beta1.CapacityQuota
		status metav1.ConditionStatus
		reason string
		want   string
	}{
		{"found", deviceQuota(gpuDevices, "4"), metav1.ConditionTrue, "Counted", "every device class the limits name is found and counted"},
		{"missing", deviceQuota("absent.example.com.deviceclass.resource.k8s.io/devices", "4", gpuDevices, "4"), metav1.ConditionFalse, "DeviceClassNotFound",
			`absent.example.com.deviceclass.resource.k8s.io/devices matches no device: no DeviceClass "absent.example.com"`},
		{"selector fails", deviceQuota("broken.example.com.deviceclass.resource.k8s.io/devices", "4"), metav1.ConditionFalse, "DeviceSelectorFailed",
			"broken.example.com.deviceclass.resource.k8s.io/devices does not count the devices its selectors fail on: DeviceClass broken.example.com: device selector failed: selector #0 on device gpu.example.com/registered-1/gpu-0: CEL runtime error: no such key: model. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"},
		{"no device limit", deviceQuota(), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := devicesProcessor(t, tc.quota, gpuClass(""), broken, gpuSlice("registered-1", 1, 2))
			p.onNode(seedNode("registered-1"), false)
			if err := p.StartLoop(context.Background(), &processors.LoopContext{Now: time.Unix(0, 0)}); err != nil {
				t.Fatal(err)
			}
			s := p.Statuses()[0]
			got := desiredStatus(s.Object, s.Quota, s.DeviceClassMissing, s.DeviceNotes)
			var cond metav1.Condition
			for _, c := range got.Conditions {
				if c.Type == autoscalingv1beta1.DeviceClassesCondition {
					cond = c
				}
			}
			if cond.Status != tc.status || cond.Reason != tc.reason || cond.Message != tc.want {
				t.Errorf("condition = %s %s %q, want %s %s %q", cond.Status, cond.Reason, cond.Message, tc.status, tc.reason, tc.want)
			}
			if c := got.Conditions[0]; c.Type != autoscalingv1beta1.ValidCondition || c.Status != metav1.ConditionTrue {
				t.Errorf("the quota is not valid: %+v", c)
			}
		})
	}
}
