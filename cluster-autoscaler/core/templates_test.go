package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/devices"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/pkg/nodetemplate/nodetemplatetest"
)

// TestTemplateFromExistingNode: a group with a ready node gets that node as
// its template, without the taints upstream strips (its own, node-condition,
// startup and status ones, by flag and by prefix), with the DaemonSet and
// mirror pods running there; a DaemonSet not yet running there is added only
// with --force-ds.
func TestTemplateFromExistingNode(t *testing.T) {
	opts := config.Defaults()
	opts.StartupTaints = []string{"cilium.io/agent-not-ready"}
	opts.IgnoreTaints = []string{"legacy-ignore"}
	opts.StatusTaints = []string{"gpu-health"}
	n := node("real-1", "g", "8", "32Gi")
	keep := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	n.Spec.Taints = []corev1.Taint{keep}
	for _, k := range []string{"DeletionCandidateOfClusterAutoscaler", corev1.TaintNodeNotReady,
		"cilium.io/agent-not-ready", "legacy-ignore", "gpu-health", nodetemplate.IgnoreTaintPrefix + "a", nodetemplate.StartupTaintPrefix + "b", nodetemplate.StatusTaintPrefix + "c"} {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
	tolerateAll := corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}
	running := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "kube-system", UID: "ds-running"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: tolerateAll}}}
	missing := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: "kube-system", UID: "ds-missing"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: tolerateAll}}}
	dsPod := testPod("kube-system", "running-abc", "", "100m", "real-1")
	dsPod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(running, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	mirror := testPod("kube-system", "static-real-1", "", "100m", "real-1")
	mirror.OwnerReferences = nil
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	workload := testPod("default", "web", "rs", "1", "real-1")
	groupOf := func(*corev1.Node) string { return "g" }
	for _, force := range []bool{false, true} {
		tmpl := newTemplates(newTaintConfig(opts), force, []*corev1.Node{n}, groupOf,
			[]*corev1.Pod{dsPod, mirror, workload}, []*appsv1.DaemonSet{running, missing})
		got, err := tmpl.forGroup(context.Background(), &fakeGroup{id: "g"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]corev1.Taint{keep}, got.Node.Spec.Taints); diff != "" {
			t.Errorf("force-ds=%v: taints (-want +got):\n%s", force, diff)
		}
		var names []string
		for _, p := range got.Pods {
			names = append(names, p.Name)
		}
		want := []string{"running-abc", "static-real-1"}
		if force {
			want = append(want, "missing-real-1")
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("force-ds=%v: template pods (-want +got):\n%s", force, diff)
		}
	}
}

// TestTemplateOfTheMixedCluster: the core makes the template of the shared
// mixed cluster from the node, and with the taints, that the Cluster API
// provider and kubectl-quota use too (nodetemplatetest).
func TestTemplateOfTheMixedCluster(t *testing.T) {
	c := nodetemplatetest.Mixed(time.Now())
	groupOf := func(n *corev1.Node) string {
		if n.Labels[nodetemplatetest.DeploymentLabel] == nodetemplatetest.DeploymentName {
			return nodetemplatetest.GroupID
		}
		return ""
	}
	tmpl := newTemplates(newTaintConfig(config.Defaults()), false, c.Nodes, groupOf, nil, nil)
	got, err := tmpl.forGroup(context.Background(), &fakeGroup{id: nodetemplatetest.GroupID})
	if err != nil {
		t.Fatal(err)
	}
	c.CheckTemplate(t, got.Node)
}

// notImplementedGroup cannot describe its nodes, as a Cluster API group
// without capacity annotations.
type notImplementedGroup struct{ *fakeGroup }

func (notImplementedGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// TestTemplateWithoutAGoodNode: a group without a good example node gets its
// provider's template, with the same taints left out as from a node; when the
// provider cannot describe the group either, the template is made from one of
// its other nodes (the first by name), upstream's last resort.
func TestTemplateWithoutAGoodNode(t *testing.T) {
	opts := config.Defaults()
	opts.StatusTaints = []string{"gpu-health"}
	unready := node("b-unready", "g", "8", "32Gi")
	unready.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	unready.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	cordoned := node("c-cordoned", "g", "8", "32Gi")
	cordoned.Spec.Unschedulable = true
	groupOf := func(*corev1.Node) string { return "g" }
	tmpl := newTemplates(newTaintConfig(opts), false, []*corev1.Node{cordoned, unready}, groupOf, nil, nil)

	providerTemplate := node("g-template", "g", "4", "16Gi")
	keep := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	providerTemplate.Spec.Taints = []corev1.Taint{keep, {Key: "gpu-health", Effect: corev1.TaintEffectNoSchedule},
		{Key: nodetemplate.StartupTaintPrefix + "cni", Effect: corev1.TaintEffectNoSchedule}}
	got, err := tmpl.forGroup(context.Background(), &fakeGroup{id: "g", template: providerTemplate})
	if err != nil {
		t.Fatal(err)
	}
	if got.Node.Name != "g-template" {
		t.Errorf("template %s, want the provider's", got.Node.Name)
	}
	if diff := cmp.Diff([]corev1.Taint{keep}, got.Node.Spec.Taints); diff != "" {
		t.Errorf("provider template taints (-want +got):\n%s", diff)
	}
	if len(providerTemplate.Spec.Taints) != 3 {
		t.Error("the provider's template was modified")
	}

	got, err = tmpl.forGroup(context.Background(), notImplementedGroup{&fakeGroup{id: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Node.Name != "b-unready" || len(got.Node.Spec.Taints) != 0 {
		t.Errorf("last resort template %s with taints %v, want b-unready without its not-ready taint", got.Node.Name, got.Node.Spec.Taints)
	}
	if _, err := newTemplates(newTaintConfig(opts), false, nil, groupOf, nil, nil).forGroup(context.Background(),
		notImplementedGroup{&fakeGroup{id: "g"}}); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("no node and no provider template: error %v, want ErrNotImplemented", err)
	}
}

// TestTemplateFromExistingNodeCarriesItsSlices: a template made from a node
// of the group comes with that node's current node-local ResourceSlices (not
// another node's, not a stale generation), so that the template's devices
// are the ones a new node publishes.
func TestTemplateFromExistingNodeCarriesItsSlices(t *testing.T) {
	n := node("real-1", "g", "8", "32Gi")
	slice := func(name, node string, generation int64) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name)},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node,
				Pool:    resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "device-0"}, {Name: "device-1"}}}}
	}
	tmpl := newTemplates(newTaintConfig(config.Defaults()), false, []*corev1.Node{n}, func(*corev1.Node) string { return "g" }, nil, nil)
	tmpl.slices = devices.CurrentByNode([]*resourcev1.ResourceSlice{slice("real-1-old", "real-1", 1), slice("real-1-gpu", "real-1", 2), slice("other-gpu", "other", 5)})
	got, err := tmpl.forGroup(context.Background(), &fakeGroup{id: "g"})
	if err != nil {
		t.Fatal(err)
	}
	want := slice("real-1-gpu", "real-1", 2)
	want.UID = ""
	if diff := cmp.Diff([]*resourcev1.ResourceSlice{want}, got.ResourceSlices); diff != "" {
		t.Errorf("template slices (-want +got):\n%s", diff)
	}
}
