package kwok

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/quotascale/quotascale/cloudprovider"
)

func TestNodeGroupForNode(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		providerID, want string
	}{
		{"kwok://general/general-abcde", "general"},
		{"kwok://scarce/x", "scarce"},
		{"kwok://removed/removed-abcde", ""},
		{"kwok://general", ""},
		{"kwok://general/a/b", ""},
		{"gce://project/zone/vm", ""},
		{"", ""},
	} {
		g, err := f.provider.NodeGroupForNode(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: tc.providerID}})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if g != nil {
			got = g.Id()
		}
		if got != tc.want {
			t.Errorf("NodeGroupForNode(%q) = %q, want %q", tc.providerID, got, tc.want)
		}
	}
}

func TestTemplateNodeInfo(t *testing.T) {
	f := newFixture(t)
	info, err := f.group("scarce").TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	want := &cloudprovider.NodeInfo{Node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "scarce-template",
			Labels: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "scarce-template", "kubernetes.io/os": "linux",
				"quotascale.io/node-group": "scarce", "type": "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{ProviderID: "kwok://scarce/scarce-template"},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Phase:      corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}}
	if diff := cmp.Diff(want, info, equateQuantities); diff != "" {
		t.Errorf("template (-want +got):\n%s", diff)
	}
	if g := f.group("general"); g.MinSize() != 1 || g.MaxSize() != 5 || !g.Exist() || g.Debug() != "general (min: 1, max: 5, target: 0)" {
		t.Errorf("general: min %d max %d exist %v debug %q", g.MinSize(), g.MaxSize(), g.Exist(), g.Debug())
	}
}

// TestWritesRetryOnConflict makes the API server refuse the first write, as when
// the cloud backend wrote in between: the provider re-reads and retries.
func TestWritesRetryOnConflict(t *testing.T) {
	f := newFixture(t)
	if err := f.group("general").IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	f.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, DefaultStateName, nil)
		}
		return false, nil, nil
	})
	if err := f.group("general").IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.group("general").TargetSize(); conflicts != 1 || got != 2 {
		t.Errorf("conflicts %d, target %d; want 1 and 2", conflicts, got)
	}
}

// TestRefreshKeepsTheLastValidConfig edits a ConfigMap source: a broken config
// is reported and ignored, a valid one takes effect.
func TestRefreshKeepsTheLastValidConfig(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kwok-config"},
		Data:       map[string]string{DefaultConfigKey: fixtureConfig},
	})
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProvider(ctx, Options{Client: client, Config: NewConfigMapSource(client, "kube-system", "kwok-config", "")})
	if err != nil {
		t.Fatal(err)
	}
	groupIDs := func() []string {
		var ids []string
		for _, g := range p.NodeGroups() {
			ids = append(ids, g.Id())
		}
		return ids
	}
	for _, tc := range []struct {
		config, wantErr string
		want            []string
	}{
		{"nodeGroups: [{name: a, minSize: 2, maxSize: 1, capacity: {cpu: '1', memory: 1Gi}}]",
			"ConfigMap kube-system/kwok-config key config.yaml: invalid kwok cloud config: nodeGroups[0] (a): maxSize 1 is less than minSize 2",
			[]string{"general", "scarce"}},
		{"nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: '1', memory: 1Gi}}]", "", []string{"a"}},
	} {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kwok-config", ResourceVersion: tc.config},
			Data:       map[string]string{DefaultConfigKey: tc.config},
		}
		if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := p.Refresh(); err != nil {
			t.Fatal(err)
		}
		gotErr := ""
		if err := p.LastConfigError(); err != nil {
			gotErr = err.Error()
		}
		if gotErr != tc.wantErr {
			t.Errorf("LastConfigError = %q, want %q", gotErr, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, groupIDs()); diff != "" {
			t.Errorf("node groups (-want +got):\n%s", diff)
		}
	}
}

// TestCancelWinsOverProvisioning: the provider cancels an instance while the
// backend is promoting it. The backend's write conflicts, it re-reads, and no
// node is created for the cancelled instance.
func TestCancelWinsOverProvisioning(t *testing.T) {
	f := newFixture(t)
	if err := f.group("general").IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(2 * time.Second)
	raced := false
	f.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// The provider's write lands first (through the tracker: the fake client
		// is locked while a reactor runs).
		gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
		obj, err := f.client.Tracker().Get(gvr, DefaultStateNamespace, DefaultStateName)
		if err != nil {
			t.Fatal(err)
		}
		cm := obj.(*corev1.ConfigMap).DeepCopy()
		delete(cm.Data, "general")
		if err := f.client.Tracker().Update(gvr, cm, DefaultStateNamespace); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, DefaultStateName, nil)
	})
	f.reconcile()
	if !raced {
		t.Fatal("the backend did not try to write")
	}
	if names := f.nodeNames(); len(names) != 0 {
		t.Errorf("nodes %v for a cancelled instance", names)
	}
	if got := instances(t, f.group("general")); len(got) != 0 {
		t.Errorf("instances %v, want none", got)
	}
}
