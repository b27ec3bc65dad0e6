package e2e

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
)

// Questions of upstream's FAQ (kubernetes/autoscaler, cluster-autoscaler/FAQ.md)
// whose answers the rows below check.
const (
	faqPodsPreventRemoval = "What types of pods can prevent CA from removing a node?"
	faqPreventNodeRemoval = "How can I prevent Cluster Autoscaler from scaling down a particular node?"
	faqPriorityPreemption = "How does Cluster Autoscaler work with Pod Priority and Preemption?"
)

// TestScaleDownFAQ: one row per behaviour of upstream's FAQ. Each row empties
// one of two nodes, puts its pod (or annotation) there, and expects the node
// kept with upstream's reason, or removed.
func TestScaleDownFAQ(t *testing.T) {
	type row struct {
		faq, behaviour string
		// place puts the row's pod on node, in ns.
		place func(t *testing.T, ctx context.Context, ns, node string)
		// keptBecause is the noScaleDown reason; empty means the node goes.
		keptBecause string
	}
	rows := []row{
		{faqPodsPreventRemoval, "a pod not backed by a controller", func(t *testing.T, ctx context.Context, ns, node string) {
			bindPod(t, ctx, ns, node, "bare", nil)
		}, "NotReplicated"},
		{faqPodsPreventRemoval, "a pod of a custom controller, with --skip-nodes-with-custom-controller-pods", func(t *testing.T, ctx context.Context, ns, node string) {
			owner, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "custom-owner"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bindPod(t, ctx, ns, node, "custom", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
			})
		}, "NotReplicated"},
		{faqPodsPreventRemoval, "a pod with local storage (emptyDir)", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "local", func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
				s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			})
		}, "LocalStorageRequested"},
		{faqPodsPreventRemoval, "local storage named in safe-to-evict-local-volumes does not", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "local-ok", func(s *corev1.PodSpec, m *metav1.ObjectMeta) {
				s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				m.Annotations = map[string]string{scaledown.SafeToEvictLocalVolumesAnnotation: "scratch"}
			})
		}, ""},
		{faqPodsPreventRemoval, `a pod annotated safe-to-evict: "false"`, func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "unsafe", func(_ *corev1.PodSpec, m *metav1.ObjectMeta) {
				m.Annotations = map[string]string{scaledown.SafeToEvictAnnotation: "false"}
			})
		}, "NotSafeToEvictAnnotation"},
		{faqPodsPreventRemoval, `safe-to-evict: "true" lets even a bare pod move`, func(t *testing.T, ctx context.Context, ns, node string) {
			bindPod(t, ctx, ns, node, "evictable", func(p *corev1.Pod) {
				p.Annotations = map[string]string{scaledown.SafeToEvictAnnotation: "true"}
			})
		}, ""},
		{faqPodsPreventRemoval, "a pod that cannot be moved elsewhere (required node affinity)", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "pinned", func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
			})
		}, "NoPlaceToMovePods"},
		{faqPodsPreventRemoval, "a kube-system pod no PodDisruptionBudget covers, with --skip-nodes-with-system-pods", func(t *testing.T, ctx context.Context, _, node string) {
			name := "e2e-system-" + node
			t.Cleanup(func() {
				_ = cluster.Client.AppsV1().Deployments(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			deploymentOn(t, ctx, metav1.NamespaceSystem, node, name, nil)
		}, "UnmovableKubeSystemPod"},
		{faqPodsPreventRemoval, "a pod whose PodDisruptionBudget allows no disruption", func(t *testing.T, ctx context.Context, ns, node string) {
			createGuardedDeployment(t, ctx, ns, node, nil)
		}, "NotEnoughPdb"},
		{faqPodsPreventRemoval, "a controller-backed pod moves", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "movable", nil)
		}, ""},
		{faqPreventNodeRemoval, "the node annotated scale-down-disabled", func(t *testing.T, ctx context.Context, ns, node string) {
			n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[scaledown.ScaleDownDisabledAnnotation] = "true"
			if _, err := cluster.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "ScaleDownDisabledAnnotation"},
		{faqPriorityPreemption, "an expendable pod (priority below the cutoff) keeps no node", func(t *testing.T, ctx context.Context, ns, node string) {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-expendable"}, Value: -11}
			if _, err := cluster.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			bindPod(t, ctx, ns, node, "expendable", func(p *corev1.Pod) { p.Spec.PriorityClassName = pc.Name })
		}, ""},
	}
	for _, r := range rows {
		t.Run(r.behaviour, func(t *testing.T) {
			t.Logf("FAQ: %s", r.faq)
			ctx := testContext(t)
			ns := createNamespace(t, ctx, "")
			a := startAutoscaler(t, ctx, scaleDownGroup(0), fastScaleDown)
			growTo(t, ctx, a, ns, 2)
			target := nodeOf(t, ctx, ns, "keeper-1")
			deletePod(t, ctx, ns, "keeper-1")
			r.place(t, ctx, ns, target)
			if r.keptBecause != "" {
				a.keptFor(t, ctx, target, "no.scale.down.node."+r.keptBecause)
				if got := groupNodes(t, ctx); !contains(got, target) {
					t.Fatalf("node %s was removed; nodes %v", target, got)
				}
				return
			}
			a.loopUntil(t, ctx, "node "+target+" removed", func(ctx context.Context) error {
				got, err := listGroupNodes(ctx)
				if err != nil {
					return err
				}
				if contains(got, target) {
					return fmt.Errorf("still there: %v", got)
				}
				return nil
			})
		})
	}
}

// bindPod creates a 100m pod bound to node, as a static assignment.
func bindPod(t *testing.T, ctx context.Context, ns, node, name string, mutate func(*corev1.Pod)) {
	t.Helper()
	p := newPod(ns, name, name, "100m", func(p *corev1.Pod) {
		p.Spec.NodeName = node
		if mutate != nil {
			mutate(p)
		}
	})
	if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ctx, ns, name, 1)
}

// deploymentOn runs one 100m replica, preferring node, and waits for it there.
func deploymentOn(t *testing.T, ctx context.Context, ns, node, name string, mutate func(*corev1.PodSpec, *metav1.ObjectMeta)) {
	t.Helper()
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
			}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	if mutate != nil {
		mutate(&tmpl.Spec, &tmpl.ObjectMeta)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, name+" running on "+node, func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != node || pods.Items[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%d pods, first on %q", len(pods.Items), firstNode(pods.Items))
		}
		return nil
	})
}
