package clusterapi

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

var (
	mdResource      = schema.GroupVersionResource{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinedeployments"}
	machineResource = schema.GroupVersionResource{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machines"}
)

// scalingFixture is a MachineDeployment "md" with min size 1 and its
// machines, on a fake dynamic client the test can make fail.
type scalingFixture struct {
	p      *Provider
	client *dynamicfake.FakeDynamicClient
	g      *nodeGroup
}

// newScalingFixture builds md with replicas and one machine per entry of
// nodes: a node name for a registered machine, "" for one without a node.
func newScalingFixture(t *testing.T, replicas int64, nodes ...string) *scalingFixture {
	t.Helper()
	objs := []runtime.Object{scalable("MachineDeployment", "md", sizes("1", "10"), replicas)}
	for i, node := range nodes {
		name := "md-" + string(rune('a'+i))
		spec, status := map[string]any{}, map[string]any{}
		if node != "" {
			spec["providerID"] = "kwok://" + node
			status["nodeRef"] = map[string]any{"name": node}
			status["phase"] = "Running"
		}
		m := machine(name, spec, status)
		m.SetLabels(map[string]string{DeploymentNameLabel: "md"})
		objs = append(objs, m)
	}
	listKinds := map[schema.GroupVersionResource]string{
		mdResource: "MachineDeploymentList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinesets"}:  "MachineSetList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinepools"}: "MachinePoolList",
		machineResource: "MachineList",
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProvider(ctx, Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup() })
	groups := p.NodeGroups()
	if len(groups) != 1 {
		t.Fatalf("%d node groups, want 1", len(groups))
	}
	return &scalingFixture{p: p, client: client, g: groups[0].(*nodeGroup)}
}

func (f *scalingFixture) replicas(t *testing.T) int64 {
	t.Helper()
	md, err := f.client.Resource(mdResource).Namespace("ns").Get(context.Background(), "md", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	return r
}

// marked lists the machines carrying the delete-machine annotation.
func (f *scalingFixture) marked(t *testing.T) []string {
	t.Helper()
	list, err := f.client.Resource(machineResource).Namespace("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		if _, ok := m.GetAnnotations()[DeleteMachineAnnotation]; ok {
			out = append(out, m.GetName())
		}
	}
	return out
}

// failScale makes every write of the scale subresource fail.
func (f *scalingFixture) failScale() {
	f.client.PrependReactor("update", "machinedeployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "scale" {
			return true, nil, errors.New("injected: the API server refused the scale")
		}
		return false, nil, nil
	})
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "kwok://" + name}}
}

func TestDeleteNodes(t *testing.T) {
	t.Run("marks the machine and lowers the replicas", func(t *testing.T) {
		f := newScalingFixture(t, 2, "n1", "n2")
		if err := f.g.DeleteNodes([]*corev1.Node{node("n2")}); err != nil {
			t.Fatal(err)
		}
		if got := f.replicas(t); got != 1 {
			t.Errorf("replicas %d, want 1", got)
		}
		if diff := cmp.Diff([]string{"md-b"}, f.marked(t)); diff != "" {
			t.Errorf("marked machines (-want +got):\n%s", diff)
		}
	})
	t.Run("refuses to go below the min size", func(t *testing.T) {
		f := newScalingFixture(t, 1, "n1")
		err := f.g.DeleteNodes([]*corev1.Node{node("n1")})
		want := "MachineDeployment/ns/md: deleting 1 nodes would shrink it from 1 to 0, below its min size 1"
		if err == nil || err.Error() != want {
			t.Fatalf("DeleteNodes error %v, want %q", err, want)
		}
		if got := f.replicas(t); got != 1 {
			t.Errorf("replicas %d, want 1", got)
		}
		if got := f.marked(t); len(got) > 0 {
			t.Errorf("a refused deletion marked %v", got)
		}
	})
	t.Run("takes the mark back when the scaling fails", func(t *testing.T) {
		f := newScalingFixture(t, 3, "n1", "n2", "n3")
		f.failScale()
		err := f.g.DeleteNodes([]*corev1.Node{node("n2"), node("n3")})
		if err == nil {
			t.Fatal("DeleteNodes succeeded with the scale refused")
		}
		if got := f.replicas(t); got != 3 {
			t.Errorf("replicas %d, want 3", got)
		}
		if got := f.marked(t); len(got) > 0 {
			t.Errorf("machines still marked for deletion after the failed scaling: %v", got)
		}
	})
}

func TestForceDeleteNodes(t *testing.T) {
	f := newScalingFixture(t, 1, "")
	// The autoscaler names an unregistered machine by its pending ID.
	pending := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.NodeSpec{ProviderID: "clusterapi-pending://ns/md-a"}}
	if err := f.g.DeleteNodes([]*corev1.Node{pending}); err == nil {
		t.Fatal("DeleteNodes went below the min size")
	}
	if err := f.g.ForceDeleteNodes([]*corev1.Node{pending}); err != nil {
		t.Fatalf("ForceDeleteNodes: %v", err)
	}
	if got := f.replicas(t); got != 0 {
		t.Errorf("replicas %d, want 0", got)
	}
	if diff := cmp.Diff([]string{"md-a"}, f.marked(t)); diff != "" {
		t.Errorf("marked machines (-want +got):\n%s", diff)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int64
		machines []string
		delta    int
		want     int64
		wantErr  string
	}{
		{name: "gives up replicas that never became machines", replicas: 5, machines: []string{"n1", ""}, delta: -3, want: 2},
		{name: "refuses to drop a machine without a node", replicas: 3, machines: []string{"n1", ""}, delta: -2, want: 3,
			wantErr: "MachineDeployment/ns/md: decreasing the target size by 2 from 3 would delete some of its 2 instances"},
		{name: "refuses to drop a registered machine", replicas: 2, machines: []string{"n1", "n2"}, delta: -1, want: 2,
			wantErr: "MachineDeployment/ns/md: decreasing the target size by 1 from 2 would delete some of its 2 instances"},
		{name: "not a decrease", replicas: 2, machines: []string{"n1"}, delta: 0, want: 2,
			wantErr: "MachineDeployment/ns/md: size decrease must be negative, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newScalingFixture(t, tc.replicas, tc.machines...)
			err := f.g.DecreaseTargetSize(tc.delta)
			if gotErr := errString(err); gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if got := f.replicas(t); got != tc.want {
				t.Errorf("replicas %d, want %d", got, tc.want)
			}
			if target, _ := f.g.TargetSize(); int64(target) != tc.want {
				t.Errorf("TargetSize %d, want %d", target, tc.want)
			}
			if got := f.marked(t); len(got) > 0 {
				t.Errorf("DecreaseTargetSize marked machines for deletion: %v", got)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
