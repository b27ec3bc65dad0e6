package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/core"
)

// newPod is a 1-container pod of ns requesting cpu, labelled app=prefix, for
// mutate to shape.
func newPod(ns, name, app, cpu string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func createShapedPods(t *testing.T, ctx context.Context, ns, app string, n int, cpu string, mutate func(*corev1.Pod)) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, newPod(ns, fmt.Sprintf("%s-%d", app, i), app, cpu, mutate), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRunning waits until n pods of ns labelled app run.
func waitRunning(t *testing.T, ctx context.Context, ns, app string, n int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%d %s pods running", n, app), func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != n {
			return fmt.Errorf("%d of %d running", running, n)
		}
		return nil
	})
}

// TestScaleUpAffinityAwareEstimate: on 8-cpu nodes, 4 pods of 1 cpu that must
// not share a host ask for 4 nodes in the first scale-up, as upstream's
// estimator does; so do 4 pods under a hostname topology spread constraint
// (maxSkew 1, DoNotSchedule) when the group already has a node they count as a
// domain (full, so they cannot run there).
func TestScaleUpAffinityAwareEstimate(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, tc := range []struct {
		name   string
		filler bool
		shape  func(*corev1.Pod)
	}{
		{"required anti-affinity on kubernetes.io/hostname", false, func(p *corev1.Pod) {
			onEightCPUGroup(p)
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selector, TopologyKey: corev1.LabelHostname}}}}
		}},
		{"hostname topology spread, maxSkew 1, DoNotSchedule", true, func(p *corev1.Pod) {
			onEightCPUGroup(p)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := createNamespace(t, ctx, "")
			a := startAutoscaler(t, ctx, eightCPUGroup, nil)
			start := 0
			if tc.filler {
				createShapedPods(t, ctx, ns, "filler", 1, "8", onEightCPUGroup)
				waitUnschedulable(t, ctx, ns, 1)
				a.loop(t, ctx)
				waitRunning(t, ctx, ns, "filler", 1)
				start = 1
			}
			createShapedPods(t, ctx, ns, "web", 4, "1", tc.shape)
			waitUnschedulable(t, ctx, ns, 4)
			a.loopUntilScaleUp(t, ctx, "e2e-kwok-8cpu", start)
			if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": start + 4}, a.targets(t)); diff != "" {
				t.Fatalf("targets after the first scale-up (-want +got):\n%s", diff)
			}
			waitRunning(t, ctx, ns, "web", 4)
		})
	}
}

// loopUntilScaleUp runs loops until group's target leaves from: the loop that
// first sees pods just created (its informers lag the API a little) is the
// first scale-up, whose size the caller checks.
func (a *testAutoscaler) loopUntilScaleUp(t *testing.T, ctx context.Context, group string, from int) {
	t.Helper()
	waitFor(t, ctx, "a scale-up of "+group, func(ctx context.Context) error {
		a.loop(t, ctx)
		if got := a.targets(t)[group]; got == from {
			return fmt.Errorf("target still %d", got)
		}
		return nil
	})
}

// onFourCPUGroup and onEightCPUGroup keep a pod off the nodes other tests
// leave behind, so that only the group under test can take it.
func onFourCPUGroup(p *corev1.Pod) {
	p.Spec.NodeSelector = map[string]string{kwok.NodeGroupLabel: "e2e-kwok-4cpu"}
}

func onEightCPUGroup(p *corev1.Pod) {
	p.Spec.NodeSelector = map[string]string{kwok.NodeGroupLabel: "e2e-kwok-8cpu"}
}

// TestScaleUpPodSelection: a pod below --expendable-pods-priority-cutoff
// triggers no scale-up, even once its scheduler gave up on it; the pods of a
// scheduler in --bypassed-scheduler-names count at once, though no scheduler
// runs under that name to mark them unschedulable.
func TestScaleUpPodSelection(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, fourCPUGroup, func(o *config.Options) {
		o.BypassedSchedulerNames = []string{"e2e-batch-scheduler"}
	})
	createPriorityClass(t, ctx, "e2e-expendable", -11)
	createShapedPods(t, ctx, ns, "expendable", 1, "1", func(p *corev1.Pod) {
		onFourCPUGroup(p)
		p.Spec.PriorityClassName = "e2e-expendable"
	})
	waitUnschedulable(t, ctx, ns, 1)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 0}, a.targets(t)); diff != "" {
		t.Fatalf("an expendable pod scaled up (-want +got):\n%s", diff)
	}
	// 4 pods of 1 cpu fill one 4-cpu node; were the expendable pod counted
	// too, the scale-up would ask for 2.
	createShapedPods(t, ctx, ns, "batch", 4, "1", func(p *corev1.Pod) {
		onFourCPUGroup(p)
		p.Spec.SchedulerName = "e2e-batch-scheduler"
	})
	a.loopUntilScaleUp(t, ctx, "e2e-kwok-4cpu", 0)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets once the bypassed scheduler's 4 pods exist (-want +got):\n%s", diff)
	}
}

// TestScaleUpWaitsForPodScaleUpDelay: a pod annotated with a scale-up delay
// longer than --new-pod-scale-up-delay waits that long.
func TestScaleUpWaitsForPodScaleUpDelay(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, fourCPUGroup, nil)
	createShapedPods(t, ctx, ns, "patient", 1, "1", func(p *corev1.Pod) {
		onFourCPUGroup(p)
		p.Annotations = map[string]string{core.PodScaleUpDelayAnnotation: "1h"}
	})
	waitUnschedulable(t, ctx, ns, 1)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 0}, a.targets(t)); diff != "" {
		t.Fatalf("a pod that asked to wait an hour scaled up (-want +got):\n%s", diff)
	}
	createShapedPods(t, ctx, ns, "eager", 1, "1", func(p *corev1.Pod) {
		onFourCPUGroup(p)
		p.Annotations = map[string]string{core.PodScaleUpDelayAnnotation: "not-a-duration"}
	})
	waitUnschedulable(t, ctx, ns, 2)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 1}, a.targets(t)); diff != "" {
		t.Fatalf("a pod with an unparsable delay waits for nothing (-want +got):\n%s", diff)
	}
}

// TestScaleUpCountsDaemonSetPods: the nodes of the group run a DaemonSet of 2
// cpu, so a new 8-cpu node has room for one 4-cpu pod, not two: 3 pods need 3
// nodes in the first scale-up (2 if the template ignored the DaemonSet).
func TestScaleUpCountsDaemonSetPods(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, eightCPUGroup, nil)
	createDaemonSet(t, ctx, ns, "node-agent", "2", map[string]string{kwok.NodeGroupLabel: "e2e-kwok-8cpu"}, nil)
	createShapedPods(t, ctx, ns, "work", 3, "4", onEightCPUGroup)
	waitUnschedulable(t, ctx, ns, 3)
	a.loopUntilScaleUp(t, ctx, "e2e-kwok-8cpu", 0)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": 3}, a.targets(t)); diff != "" {
		t.Fatalf("targets after the first scale-up (-want +got):\n%s", diff)
	}
	waitRunning(t, ctx, ns, "work", 3)
}

// TestScaleUpTreeJudgesOnlyItsSchedulersPods: the ElasticQuotaTree holds back
// only the pods of the schedulers in --elastic-quota-scheduler-names (here
// default-scheduler). Five 5-cpu pods of another scheduler in a leaf whose max
// admits four get five nodes, as the stock autoscaler would give them; the
// tree's own scheduler's pods get four (TestAutoscalerHonoursElasticQuota).
func TestScaleUpTreeJudgesOnlyItsSchedulersPods(t *testing.T) {
	ctx := testContext(t)
	var namespaces [4]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	applyTree(t, ctx, seedTreeFor(t, namespaces))
	a := startAutoscaler(t, ctx, eightCPUGroup, func(o *config.Options) {
		o.BypassedSchedulerNames = []string{"e2e-plain-scheduler"}
	})
	createShapedPods(t, ctx, namespaces[0], "plain", 5, "5", func(p *corev1.Pod) {
		onEightCPUGroup(p)
		p.Spec.SchedulerName = "e2e-plain-scheduler"
	})
	// The autoscaler's informer may deliver the five pods over two loops; each
	// loop scales up for the pods it has seen, so the target climbs to five,
	// and to no more. A tree judging these pods would keep it below five.
	a.loopUntil(t, ctx, "a target of 5 for the other scheduler's pods", func(context.Context) error {
		if got := a.targets(t)["e2e-kwok-8cpu"]; got < 5 {
			return fmt.Errorf("target %d", got)
		}
		return nil
	})
	if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": 5}, a.targets(t)); diff != "" {
		t.Fatalf("targets for another scheduler's pods in a governed namespace (-want +got):\n%s", diff)
	}
}
