package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// Questions of upstream's FAQ (kubernetes/autoscaler, cluster-autoscaler/FAQ.md)
// whose answers the rows below check.
const (
	faqPodsPreventRemoval = "What types of pods can prevent CA from removing a node?"
	faqPreventNodeRemoval = "How can I prevent Cluster Autoscaler from scaling down a particular node?"
	faqPriorityPreemption = "How does Cluster Autoscaler work with Pod Priority and Preemption?"
	faqParameters         = "What are the parameters to CA?"
	faqScaleDownWorks     = "How does scale-down work?"
	faqDaemonSetEviction  = "How can I enable/disable eviction for a specific DaemonSet"
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
		// flags, when set, changes the autoscaler's options from fastScaleDown.
		flags func(*config.Options)
	}
	rows := []row{
		{faqPodsPreventRemoval, "a pod not backed by a controller", func(t *testing.T, ctx context.Context, ns, node string) {
			bindPod(t, ctx, ns, node, "bare", nil)
		}, "NotReplicated", nil},
		{faqPodsPreventRemoval, "a pod of a custom controller, with --skip-nodes-with-custom-controller-pods", func(t *testing.T, ctx context.Context, ns, node string) {
			owner, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "custom-owner"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bindPod(t, ctx, ns, node, "custom", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
			})
		}, "NotReplicated", nil},
		{faqPodsPreventRemoval, "a pod with local storage (emptyDir)", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "local", func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
				s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			})
		}, "LocalStorageRequested", nil},
		{faqPodsPreventRemoval, "local storage named in safe-to-evict-local-volumes does not", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "local-ok", func(s *corev1.PodSpec, m *metav1.ObjectMeta) {
				s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				m.Annotations = map[string]string{scaledown.SafeToEvictLocalVolumesAnnotation: "scratch"}
			})
		}, "", nil},
		{faqPodsPreventRemoval, `a pod annotated safe-to-evict: "false"`, func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "unsafe", func(_ *corev1.PodSpec, m *metav1.ObjectMeta) {
				m.Annotations = map[string]string{scaledown.SafeToEvictAnnotation: "false"}
			})
		}, "NotSafeToEvictAnnotation", nil},
		{faqPodsPreventRemoval, `safe-to-evict: "true" lets even a bare pod move`, func(t *testing.T, ctx context.Context, ns, node string) {
			bindPod(t, ctx, ns, node, "evictable", func(p *corev1.Pod) {
				p.Annotations = map[string]string{scaledown.SafeToEvictAnnotation: "true"}
			})
		}, "", nil},
		{faqPodsPreventRemoval, "a pod that cannot be moved elsewhere (required node affinity)", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "pinned", func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
			})
		}, "NoPlaceToMovePods", nil},
		{faqPodsPreventRemoval, "a kube-system pod no PodDisruptionBudget covers, with --skip-nodes-with-system-pods", func(t *testing.T, ctx context.Context, _, node string) {
			name := "e2e-system-" + node
			t.Cleanup(func() {
				_ = cluster.Client.AppsV1().Deployments(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			deploymentOn(t, ctx, metav1.NamespaceSystem, node, name, nil)
		}, "UnmovableKubeSystemPod", nil},
		{faqPodsPreventRemoval, "a pod whose PodDisruptionBudget allows no disruption", func(t *testing.T, ctx context.Context, ns, node string) {
			createGuardedDeployment(t, ctx, ns, node, nil)
		}, "NotEnoughPdb", nil},
		{faqPodsPreventRemoval, "a controller-backed pod moves", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "movable", nil)
		}, "", nil},
		{faqParameters, "a pod of a ReplicaSet of fewer replicas than --min-replica-count", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "few", nil)
		}, "MinReplicasReached", func(o *config.Options) { o.MinReplicaCount = 2 }},
		{faqParameters, "a pod of a ReplicaSet of as many replicas as --min-replica-count moves", func(t *testing.T, ctx context.Context, ns, node string) {
			deploymentOn(t, ctx, ns, node, "enough", nil)
		}, "", func(o *config.Options) { o.MinReplicaCount = 1 }},
		{faqPreventNodeRemoval, "the node annotated scale-down-disabled", func(t *testing.T, ctx context.Context, ns, node string) {
			annotateNode(t, ctx, node, scaledown.ScaleDownDisabledAnnotation, "true")
		}, "ScaleDownDisabledAnnotation", nil},
		{faqPriorityPreemption, "an expendable pod (priority below the cutoff) keeps no node", func(t *testing.T, ctx context.Context, ns, node string) {
			createPriorityClass(t, ctx, "e2e-expendable", -11)
			bindPod(t, ctx, ns, node, "expendable", func(p *corev1.Pod) { p.Spec.PriorityClassName = "e2e-expendable" })
		}, "", nil},
	}
	for _, r := range rows {
		t.Run(r.behaviour, func(t *testing.T) {
			t.Logf("FAQ: %s", r.faq)
			ctx := testContext(t)
			ns := createNamespace(t, ctx, "")
			a := startAutoscaler(t, ctx, scaleDownGroup(0), func(o *config.Options) {
				fastScaleDown(o)
				if r.flags != nil {
					r.flags(o)
				}
			})
			growTo(t, ctx, a, ns, 2)
			target := nodeOf(t, ctx, ns, "keeper-1")
			// The annotation is on the node itself: it reaches the
			// autoscaler's node informer apart from the keeper pod's
			// deletion, and an empty node still seen unannotated would go at
			// once. So it is placed while the keeper pod holds the node (too
			// busy to be a candidate), and the autoscaler must report it
			// before the pod goes.
			whileOccupied := r.keptBecause == "ScaleDownDisabledAnnotation"
			if whileOccupied {
				r.place(t, ctx, ns, target)
				a.keptFor(t, ctx, target, "no.scale.down.node."+r.keptBecause)
			}
			deletePod(t, ctx, ns, "keeper-1")
			if !whileOccupied {
				r.place(t, ctx, ns, target)
			}
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

// createDaemonSet runs name's pods of cpu on the nodes nodeSelector picks,
// with annotations on each pod.
func createDaemonSet(t *testing.T, ctx context.Context, ns, name, cpu string, nodeSelector, annotations map[string]string) {
	t.Helper()
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector:                  nodeSelector,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				},
			},
		},
	}
	if _, err := cluster.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestScaleDownFAQDaemonSetsAndDelayDeletion: one row per behaviour of
// upstream's FAQ on how a node goes. An emptied node runs two DaemonSet pods,
// one annotated enable-ds-eviction, and carries a delay-deletion annotation.
// The pod the flags and annotation send away is evicted, the other stays, and
// the node is deleted only once the annotation is gone.
func TestScaleDownFAQDaemonSetsAndDelayDeletion(t *testing.T) {
	for _, r := range []struct {
		faq, behaviour string
		// emptyNodes is --daemonset-eviction-for-empty-nodes; annotated is the
		// enable-ds-eviction value of the second DaemonSet's pods.
		emptyNodes bool
		annotated  string
		// evicted is the DaemonSet whose pod goes before the node, kept the one
		// whose pod stays.
		evicted, kept string
	}{
		{faqScaleDownWorks, "--daemonset-eviction-for-empty-nodes evicts DaemonSet pods of an empty node", true, "false", "plain", "annotated"},
		{faqDaemonSetEviction, `enable-ds-eviction: "true" evicts a pod the flags would leave`, false, "true", "annotated", "plain"},
	} {
		t.Run(r.behaviour, func(t *testing.T) {
			t.Logf("FAQ: %s; and %s (delay-deletion annotations, --node-deletion-delay-timeout)", r.faq, faqParameters)
			ctx := testContext(t)
			ns := createNamespace(t, ctx, "")
			a := startAutoscaler(t, ctx, scaleDownGroup(0), func(o *config.Options) {
				fastScaleDown(o)
				o.DaemonSetEvictionForEmptyNodes = r.emptyNodes
				o.NodeDeletionDelayTimeout = 2 * time.Minute
			})
			growTo(t, ctx, a, ns, 2)
			target := nodeOf(t, ctx, ns, "keeper-1")
			annotateNode(t, ctx, target, scaledown.DelayDeletionAnnotationPrefix+"e2e", "wait")
			onTarget := map[string]string{corev1.LabelHostname: target}
			createDaemonSet(t, ctx, ns, "plain", "100m", onTarget, nil)
			createDaemonSet(t, ctx, ns, "annotated", "100m", onTarget, map[string]string{scaledown.EnableDSEvictionAnnotation: r.annotated})
			waitRunning(t, ctx, ns, "plain", 1)
			waitRunning(t, ctx, ns, "annotated", 1)
			deletePod(t, ctx, ns, "keeper-1")

			// The loop blocks while the node's deletion is delayed, so it runs
			// here in the background until the node is gone.
			loops := make(chan error, 1)
			go func() {
				loops <- wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					if err := a.RunOnce(ctx); err != nil {
						return false, err
					}
					nodes, err := listGroupNodes(ctx)
					return err == nil && !contains(nodes, target), err
				})
			}()
			waitFor(t, ctx, "the "+r.evicted+" DaemonSet pod evicted", func(ctx context.Context) error {
				pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + r.evicted})
				if err != nil {
					return err
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName == target && p.DeletionTimestamp == nil {
						return fmt.Errorf("pod %s still runs on %s", p.Name, target)
					}
				}
				return nil
			})
			waitRunning(t, ctx, ns, r.kept, 1)
			if got := groupNodes(t, ctx); !contains(got, target) {
				t.Fatalf("node %s was deleted while its delay-deletion annotation stayed; nodes %v", target, got)
			}
			annotateNode(t, ctx, target, scaledown.DelayDeletionAnnotationPrefix+"e2e", "")
			if err := <-loops; err != nil {
				t.Fatalf("node %s not removed once its delay-deletion annotation went: %v", target, err)
			}
		})
	}
}

// annotateNode sets the annotation key on node to value, or removes it when
// value is empty.
func annotateNode(t *testing.T, ctx context.Context, node, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if value == "" {
			delete(n.Annotations, key)
		} else {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[key] = value
		}
		_, err = cluster.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScaleDownSoftTaintsUnneededNodes: as upstream with its default
// --max-bulk-soft-taint-count, a node unneeded but not yet removable gets the
// DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint, and loses it
// once a pod makes it needed again.
func TestScaleDownSoftTaintsUnneededNodes(t *testing.T) {
	t.Logf("FAQ: %s (--max-bulk-soft-taint-count, --max-bulk-soft-taint-time)", faqParameters)
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(0), func(o *config.Options) {
		fastScaleDown(o)
		o.ScaleDownUnneededTime = time.Hour
	})
	growTo(t, ctx, a, ns, 2)
	target := nodeOf(t, ctx, ns, "keeper-1")
	deletePod(t, ctx, ns, "keeper-1")
	softTainted := func(ctx context.Context) (bool, error) {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == nodetemplate.DeletionCandidateTaint && taint.Effect == corev1.TaintEffectPreferNoSchedule {
				return true, nil
			}
		}
		return false, nil
	}
	a.loopUntil(t, ctx, "the unneeded node "+target+" soft-tainted", func(ctx context.Context) error {
		if on, err := softTainted(ctx); err != nil || !on {
			return fmt.Errorf("not tainted (%v)", err)
		}
		return nil
	})
	createShapedPods(t, ctx, ns, "needed", 1, "3", func(p *corev1.Pod) { p.Spec.NodeName = target })
	waitRunning(t, ctx, ns, "needed", 1)
	a.loopUntil(t, ctx, "the needed node "+target+" relieved of the soft taint", func(ctx context.Context) error {
		if on, err := softTainted(ctx); err != nil || on {
			return fmt.Errorf("still tainted (%v)", err)
		}
		return nil
	})
	if got := groupNodes(t, ctx); !contains(got, target) {
		t.Fatalf("node %s was removed within an hour's unneeded time; nodes %v", target, got)
	}
}
