package kwok

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var equateQuantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestIncreaseSizeProvisionsAfterTheDelay(t *testing.T) {
	f := newFixture(t)
	g := f.group("general")
	if err := g.IncreaseSize(3); err != nil {
		t.Fatal(err)
	}
	creating := []string{
		"kwok://general/general-00001 Creating",
		"kwok://general/general-00002 Creating",
		"kwok://general/general-00003 Creating",
	}
	if diff := cmp.Diff(creating, instances(t, g)); diff != "" {
		t.Errorf("after IncreaseSize (-want +got):\n%s", diff)
	}
	wantState := map[string]string{"general": `{"instances":[` +
		`{"id":"kwok://general/general-00001","state":"Creating","createdAt":"2026-11-30T08:00:00Z"},` +
		`{"id":"kwok://general/general-00002","state":"Creating","createdAt":"2026-11-30T08:00:00Z"},` +
		`{"id":"kwok://general/general-00003","state":"Creating","createdAt":"2026-11-30T08:00:00Z"}]}`}
	if diff := cmp.Diff(wantState, f.stateData()); diff != "" {
		t.Errorf("state ConfigMap (-want +got):\n%s", diff)
	}

	// An autoscaler that restarts now finds the instances it asked for.
	restarted := f.newProvider()
	if got, _ := restarted.NodeGroups()[0].TargetSize(); got != 3 {
		t.Errorf("restarted provider: target size %d, want 3", got)
	}

	f.clock.Step(2*time.Second - time.Nanosecond)
	f.reconcile()
	if diff := cmp.Diff(creating, instances(t, g)); diff != "" {
		t.Errorf("before the delay passed (-want +got):\n%s", diff)
	}
	if names := f.nodeNames(); len(names) != 0 {
		t.Errorf("nodes before the delay passed: %v", names)
	}

	f.clock.Step(time.Nanosecond)
	f.reconcile()
	running := []string{
		"kwok://general/general-00001 Running",
		"kwok://general/general-00002 Running",
		"kwok://general/general-00003 Running",
	}
	if diff := cmp.Diff(running, instances(t, g)); diff != "" {
		t.Errorf("after the delay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"general-00001", "general-00002", "general-00003"}, f.nodeNames()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	node, err := f.client.CoreV1().Nodes().Get(f.ctx, "general-00002", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the fake API server adds is not ours to check.
	node.TypeMeta, node.ManagedFields = metav1.TypeMeta{}, nil
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "general-00002",
			Labels: map[string]string{
				"cloud.google.com/machine-family": "n2",
				"kubernetes.io/arch":              "amd64",
				"kubernetes.io/hostname":          "general-00002",
				"kubernetes.io/os":                "linux",
				"quotascale.io/node-group":        "general",
				"type":                            "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "kwok://general/general-00002",
			Taints:     []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("3900m"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Phase: corev1.NodePending,
		},
	}
	if diff := cmp.Diff(want, node, equateQuantities); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}

	// A second pass changes nothing: the cloud is idempotent.
	actions := len(f.client.Actions())
	f.reconcile()
	for _, a := range f.client.Actions()[actions:] {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("idle pass wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestIncreaseSizeRefusals(t *testing.T) {
	f := newFixture(t)
	g := f.group("general")
	if err := g.IncreaseSize(4); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		delta int
		want  string
	}{
		{"zero", 0, "node group general: size increase must be positive, got 0"},
		{"above max", 2, "node group general: increasing the size by 2 to 6 would exceed the max size 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.IncreaseSize(tc.delta)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if got, _ := g.TargetSize(); got != 4 {
				t.Errorf("target size %d after a refused increase, want 4", got)
			}
		})
	}

	cfg, _ := ParseConfig([]byte(fixtureConfig))
	cfg.NodeGroups[0].Failures = &FailureConfig{IncreaseSizeError: "QUOTA_EXCEEDED: regional cpu quota reached"}
	if err := f.source.Set(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.Refresh(); err != nil {
		t.Fatal(err)
	}
	err := g.IncreaseSize(1)
	if want := "node group general: QUOTA_EXCEEDED: regional cpu quota reached"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestDecreaseTargetSizeCancelsOnlyUnregisteredInstances(t *testing.T) {
	f := newFixture(t)
	g := f.group("general")
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(2 * time.Second)
	f.reconcile()
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	err := g.DecreaseTargetSize(-3)
	if want := "node group general: cannot decrease the target size by 3: only 2 of its 4 instances are not registered yet"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if err := g.DecreaseTargetSize(0); err == nil || err.Error() != "node group general: size decrease must be negative, got 0" {
		t.Fatalf("DecreaseTargetSize(0): %v", err)
	}
	if err := g.DecreaseTargetSize(-1); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kwok://general/general-00001 Running",
		"kwok://general/general-00002 Running",
		"kwok://general/general-00003 Creating",
	}
	if diff := cmp.Diff(want, instances(t, g)); diff != "" {
		t.Errorf("the newest Creating instance should be cancelled (-want +got):\n%s", diff)
	}
	f.clock.Step(2 * time.Second)
	f.reconcile()
	if diff := cmp.Diff([]string{"general-00001", "general-00002", "general-00003"}, f.nodeNames()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestDeleteNodes(t *testing.T) {
	f := newFixture(t)
	g := f.group("general")
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(2 * time.Second)
	f.reconcile()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "on-1"}, Spec: corev1.PodSpec{NodeName: "general-00001"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "on-2"}, Spec: corev1.PodSpec{NodeName: "general-00002"}}
	for _, p := range []*corev1.Pod{pod, other} {
		if _, err := f.client.CoreV1().Pods("default").Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2 := nodeWithProviderID("kwok://general/general-00001"), nodeWithProviderID("kwok://general/general-00002")
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  string
	}{
		{"below min", []*corev1.Node{n1, n2}, "node group general: deleting 2 nodes would shrink it to 0, below its min size 1"},
		{"other group", []*corev1.Node{nodeWithProviderID("kwok://scarce/scarce-00001")},
			`node group general: node scarce-00001 (provider ID "kwok://scarce/scarce-00001") does not belong to it`},
		{"not kwok", []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}}, `node group general: node plain (provider ID "") does not belong to it`},
		{"unknown instance", []*corev1.Node{nodeWithProviderID("kwok://general/general-99999")}, "node group general: no instance kwok://general/general-99999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := g.DeleteNodes(tc.nodes); err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if err := g.DeleteNodes([]*corev1.Node{n1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"kwok://general/general-00001 Deleting", "kwok://general/general-00002 Running"}
	if diff := cmp.Diff(want, instances(t, g)); diff != "" {
		t.Errorf("after DeleteNodes (-want +got):\n%s", diff)
	}
	if got, _ := g.TargetSize(); got != 1 {
		t.Errorf("target size %d, want 1", got)
	}
	// Deleting it again is a no-op, not a second decrement.
	if err := g.DeleteNodes([]*corev1.Node{n1}); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if diff := cmp.Diff([]string{"kwok://general/general-00002 Running"}, instances(t, g)); diff != "" {
		t.Errorf("after the cloud's pass (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"general-00002"}, f.nodeNames()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	pods, err := f.client.CoreV1().Pods("default").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "on-2" {
		t.Errorf("pods after deleting general-00001: %v, want only on-2", pods.Items)
	}
	// At its min size, only ForceDeleteNodes removes the last one.
	if err := g.DeleteNodes([]*corev1.Node{n2}); err == nil {
		t.Errorf("DeleteNodes went below the min size")
	}
	if err := g.ForceDeleteNodes([]*corev1.Node{n2}); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.TargetSize(); got != 0 {
		t.Errorf("target size after ForceDeleteNodes %d, want 0", got)
	}
}

func TestInjectedFailures(t *testing.T) {
	f := newFixture(t)
	g := f.group("scarce")
	if err := g.IncreaseSize(3); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
	f.reconcile()
	// failAfter: 1 lets the first instance through, then the zone is out of n2.
	failed := ` class=1 ZONE_RESOURCE_POOL_EXHAUSTED "no n2 left"`
	want := []string{
		"kwok://scarce/scarce-00001 Running",
		"kwok://scarce/scarce-00002 Creating" + failed,
		"kwok://scarce/scarce-00003 Creating" + failed,
	}
	if diff := cmp.Diff(want, instances(t, g)); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"scarce-00001"}, f.nodeNames()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got, _ := g.TargetSize(); got != 3 {
		t.Errorf("failed instances count towards the target until deleted: got %d, want 3", got)
	}

	// The autoscaler deletes failed instances through nodes built from their IDs.
	if err := g.DeleteNodes([]*corev1.Node{nodeWithProviderID("kwok://scarce/scarce-00002"), nodeWithProviderID("kwok://scarce/scarce-00003")}); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if diff := cmp.Diff([]string{"kwok://scarce/scarce-00001 Running"}, instances(t, g)); diff != "" {
		t.Errorf("after deleting the failed instances (-want +got):\n%s", diff)
	}

	// The stockout ends at run time: new instances provision again.
	cfg, _ := ParseConfig([]byte(fixtureConfig))
	cfg.NodeGroups[1].Failures = nil
	if err := f.source.Set(cfg); err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
	f.reconcile()
	want = []string{"kwok://scarce/scarce-00001 Running", "kwok://scarce/scarce-00004 Running"}
	if diff := cmp.Diff(want, instances(t, g)); diff != "" {
		t.Errorf("after the failure was lifted (-want +got):\n%s", diff)
	}
}
