package core

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/processors"
)

// recorded is what a loop decided, in a form two loops can be compared by:
// every option the expander saw, and the scale-up's outcome.
type recorded struct {
	Options     []string
	Increases   []string
	Unscheduled []string
}

type recorder struct {
	inner expander.Strategy
	seen  *recorded
}

func (r recorder) BestOption(options []expander.Option) *expander.Option {
	for _, o := range options {
		var pods []string
		for _, p := range o.Pods {
			pods = append(pods, p.Name)
		}
		sort.Strings(pods)
		r.seen.Options = append(r.seen.Options, fmt.Sprintf("%s +%d %v", o.NodeGroup.Id(), o.NodeCount, pods))
	}
	return r.inner.BestOption(options)
}

func (r recorder) Process(_ context.Context, _ *processors.LoopContext, status *processors.ScaleUpStatus) {
	for _, inc := range status.Increases {
		r.seen.Increases = append(r.seen.Increases, fmt.Sprintf("%s %d->%d", inc.Group.Id(), inc.Current, inc.New))
	}
	for _, info := range status.PodsRemainUnschedulable {
		r.seen.Unscheduled = append(r.seen.Unscheduled, fmt.Sprintf("%s %d rejected %v skipped %v",
			info.Pods[0].Name, len(info.Pods), info.Rejected, info.Skipped))
	}
}

// similarGroupsFixture has node groups that share a shape and differ in
// labels (zones), one of the same shape tainted, one with a lower max, one
// larger and one with GPUs, every node full; and pending pods of the given
// kinds, 24 of each, with one of each kind running in zone z1.
func similarGroupsFixture(kinds []string) *loopFixture {
	f := &loopFixture{provider: &fakeProvider{}}
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	type groupSpec struct {
		id, cpu, zone string
		max           int
		taint, gpu    bool
	}
	specs := []groupSpec{
		{id: "a0", cpu: "8", zone: "z0", max: 100}, {id: "a1", cpu: "8", zone: "z1", max: 100}, {id: "a2", cpu: "8", zone: "z2", max: 100},
		{id: "a3", cpu: "8", zone: "z0", max: 100}, {id: "small", cpu: "8", zone: "z1", max: 4},
		{id: "tainted", cpu: "8", zone: "z0", max: 100, taint: true}, {id: "big", cpu: "16", zone: "z2", max: 100},
		{id: "gpu", cpu: "8", zone: "z1", max: 100, gpu: true},
	}
	for _, s := range specs {
		g := &fakeGroup{id: s.id, max: s.max}
		f.provider.groups = append(f.provider.groups, g)
		for n := 0; n < 2; n++ {
			name := fmt.Sprintf("node-%s-%d", s.id, n)
			nd := node(name, s.id, s.cpu, "64Gi")
			nd.Labels[corev1.LabelTopologyZone] = s.zone
			if s.taint {
				nd.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			}
			if s.gpu {
				nd.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("4")
				nd.Status.Allocatable = nd.Status.Capacity
			}
			_ = nodeIdx.Add(nd)
			g.instances = append(g.instances, cloudprovider.Instance{Id: nd.Spec.ProviderID,
				Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
			g.target++
			if g.template == nil {
				g.template = nd
			}
			_ = podIdx.Add(testPod("bound", "fill-"+name, "rs-fill", s.cpu, name))
		}
	}
	for _, kind := range kinds {
		// A pod of the kind already runs in zone z1: spreading, affinity
		// and anti-affinity then tell the zones apart.
		running := testPod("work", kind+"-running", "rs-"+kind, "0", "node-a1-0")
		running.Labels = map[string]string{"app": kind}
		_ = podIdx.Add(running)
		for i := 0; i < 24; i++ {
			p := testPod("work", fmt.Sprintf("%s-%02d", kind, i), "rs-"+kind, "1", "")
			p.Labels = map[string]string{"app": kind}
			shape(p, kind)
			_ = podIdx.Add(p)
		}
	}
	f.nodes = corelisters.NewNodeLister(nodeIdx)
	f.pods = corelisters.NewPodLister(podIdx)
	return f
}

// shape gives a pending pod of a kind its constraint.
func shape(p *corev1.Pod, kind string) {
	self := &metav1.LabelSelector{MatchLabels: map[string]string{"app": kind}}
	switch kind {
	case "selector":
		p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "z1"}
	case "toleration":
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	case "antiaffinity":
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: self, TopologyKey: corev1.LabelHostname}}}}
	case "zoneanti":
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: self, TopologyKey: corev1.LabelTopologyZone}}}}
	case "zoneaffinity":
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: self, TopologyKey: corev1.LabelTopologyZone}}}}
	case "spread":
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: self}}
	case "gpu":
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	case "hostport":
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	case "big":
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("6")
	}
}

// TestSimilarGroupsShareEstimates: a loop that estimates each shape of node
// group once and reuses the estimate for the groups of that shape sees the
// same options and decides the same as a loop that estimates every group,
// for pods that read labels, taints, ports, extended resources and other
// pods, alone and together. Fails when the shape leaves out what a plugin
// reads (taints, allocatable, the node limit) or when a pod reading labels
// is let share an estimate.
func TestSimilarGroupsShareEstimates(t *testing.T) {
	kinds := []string{"plain", "big", "selector", "toleration", "antiaffinity", "zoneanti", "zoneaffinity", "spread", "gpu", "hostport"}
	scenarios := [][]string{{"plain", "big"}, {"plain", "antiaffinity"}, {"plain", "zoneanti"}}
	for _, k := range kinds {
		scenarios = append(scenarios, []string{k})
	}
	scenarios = append(scenarios, kinds)
	for _, kinds := range scenarios {
		t.Run(fmt.Sprint(kinds), func(t *testing.T) {
			run := func(everyGroup bool) (recorded, int) {
				f := similarGroupsFixture(kinds)
				a := newTestAutoscaler(t, f)
				a.estimateEveryGroup = everyGroup
				var seen recorded
				rec := recorder{inner: a.expander, seen: &seen}
				a.expander = rec
				a.StatusProcessors = append(a.StatusProcessors, rec)
				now := time.Unix(1000, 0)
				if err := a.RunOnce(context.Background(), now); err != nil {
					t.Fatal(err)
				}
				return seen, a.reusedEstimates
			}
			want, _ := run(true)
			// A difference must come from the reuse, not from chance.
			if again, _ := run(true); !cmp.Equal(want, again) {
				t.Fatalf("two loops estimating every group differ:\n%s", cmp.Diff(want, again))
			}
			got, reused := run(false)
			if len(want.Options) == 0 {
				t.Fatal("no option at all: the scenario tests nothing")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("reusing estimates changed the loop (-every group estimated +reused):\n%s", diff)
			}
			shareable := map[string]bool{"plain": true, "big": true, "antiaffinity": true, "toleration": true, "hostport": true}
			all := true
			for _, k := range kinds {
				all = all && shareable[k]
			}
			if all && reused == 0 {
				t.Error("no estimate was reused for pods that read no label but the hostname")
			}
			if len(kinds) == 1 && !all && reused > 0 {
				t.Errorf("%d estimates reused for pods that read labels", reused)
			}
		})
	}
}
