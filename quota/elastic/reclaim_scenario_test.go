package elastic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// cluster simulates the scheduler and the ReplicaSet controller on data:
// pending pods are tried in order; a refused pod gets a reclaim plan if one
// exists; evicted pods are recreated as new pending pods.
type cluster struct {
	t       *testing.T
	tree    *Tree
	running []*simPod
	pending []*simPod
	created int
	evicted []string // namespaces of victims, in eviction order
}

type simPod struct {
	uid       types.UID
	namespace string
	requests  corev1.ResourceList
	priority  int32
	created   time.Time
}

func newCluster(t *testing.T, tree *schedulingv1beta1.ElasticQuotaTree) *cluster {
	return &cluster{t: t, tree: mustBuild(t, tree)}
}

func (c *cluster) newPod(namespace string, requests corev1.ResourceList) *simPod {
	c.created++
	// Creation times come from a counter, never the clock.
	return &simPod{
		uid:       types.UID(fmt.Sprintf("%s-%03d", namespace, c.created)),
		namespace: namespace, requests: requests,
		created: time.Unix(int64(c.created), 0),
	}
}

// deploy applies a deployment and lets the scheduler settle.
func (c *cluster) deploy(namespace string, replicas int, requests corev1.ResourceList) {
	for range replicas {
		c.pending = append(c.pending, c.newPod(namespace, requests))
	}
	c.settle()
}

func (c *cluster) settle() {
	for pass := 0; ; pass++ {
		if pass > 100 {
			c.t.Fatal("scheduler did not settle")
		}
		progressed := false
		queue := c.pending
		c.pending = nil
		for i, p := range queue {
			if c.schedule(p) {
				progressed = true
				c.pending = append(c.pending, queue[i+1:]...)
				break // the queue changed; restart from the front like the scheduler's backoff would
			}
			c.pending = append(c.pending, p)
		}
		c.checkInvariants()
		if !progressed {
			return
		}
	}
}

func (c *cluster) schedule(p *simPod) bool {
	if c.tree.Admit(p.namespace, p.requests).Admitted() {
		c.bind(p)
		return true
	}
	candidates := make([]Candidate, 0, len(c.running))
	for _, r := range c.running {
		candidates = append(candidates, Candidate{UID: r.uid, Priority: r.priority, Created: r.created})
	}
	plan, ok := c.tree.PlanReclaim(Preemptor{Namespace: p.namespace, Requests: p.requests, Priority: p.priority}, candidates)
	if !ok {
		return false
	}
	if len(plan.Victims) == 0 {
		c.t.Fatalf("empty plan for %s, which Admit refused", p.uid)
	}
	for _, uid := range plan.Victims {
		i := slices.IndexFunc(c.running, func(r *simPod) bool { return r.uid == uid })
		victim := c.running[i]
		c.running = slices.Delete(c.running, i, i+1)
		c.tree.RemovePod(uid)
		c.evicted = append(c.evicted, victim.namespace)
		c.pending = append(c.pending, c.newPod(victim.namespace, victim.requests))
	}
	if v := c.tree.Admit(p.namespace, p.requests); !v.Admitted() {
		c.t.Fatalf("preemptor %s does not fit after its plan: %s", p.uid, v.Message())
	}
	c.bind(p)
	return true
}

func (c *cluster) bind(p *simPod) {
	c.tree.AddRequests(p.uid, p.namespace, p.requests)
	c.running = append(c.running, p)
}

func (c *cluster) checkInvariants() {
	c.t.Helper()
	for pos := range c.tree.shape.nodes {
		n := &c.tree.shape.nodes[pos]
		used := c.tree.usedAt(pos)
		for d := range used {
			if used[d] > n.max[d] {
				c.t.Fatalf("quota node %s over max on %s: %d > %d", n.name, c.tree.shape.index.Name(d), used[d], n.max[d])
			}
		}
	}
}

func (c *cluster) runningIn(namespaces ...string) []int {
	counts := make([]int, len(namespaces))
	for _, p := range c.running {
		if i := slices.Index(namespaces, p.namespace); i >= 0 {
			counts[i]++
		}
	}
	return counts
}

func (c *cluster) usedOf(node string, resource corev1.ResourceName) int64 {
	pos := c.tree.shape.byName[node]
	d, _ := c.tree.shape.index.Position(resource)
	used := c.tree.usedAt(pos)[d]
	if resources.IsMilli(resource) {
		return used / 1000
	}
	return used
}

func TestSeedScenarioBorrowThenReclaim(t *testing.T) {
	c := newCluster(t, seedTree(t))
	namespaces := []string{"namespace1", "namespace2", "namespace3", "namespace4"}
	steps := []struct {
		namespace string
		want      []int
		evicted   []string
	}{
		{"namespace1", []int{4, 0, 0, 0}, nil},
		{"namespace2", []int{4, 4, 0, 0}, nil},
		{"namespace3", []int{3, 3, 2, 0}, []string{"namespace2", "namespace1"}},
		{"namespace4", []int{2, 2, 2, 2}, []string{"namespace2", "namespace1", "namespace2", "namespace1"}},
	}
	for _, step := range steps {
		c.deploy(step.namespace, 5, cpu("5"))
		if diff := cmp.Diff(step.want, c.runningIn(namespaces...)); diff != "" {
			t.Fatalf("after deploying in %s, running per namespace (-want +got):\n%s", step.namespace, diff)
		}
		if diff := cmp.Diff(step.evicted, c.evicted); diff != "" {
			t.Errorf("after deploying in %s, evictions (-want +got):\n%s", step.namespace, diff)
		}
	}
	if got := len(c.pending); got != 12 {
		t.Errorf("%d pods pending, want 12", got)
	}
}

func TestTwoFlatQuotasMeetAtTheirMin(t *testing.T) {
	c := newCluster(t, flatTree("cpu", "8", [3]string{"first", "4", "6"}, [3]string{"second", "4", "6"}))
	c.deploy("first", 4, cpu("2"))
	if got := c.usedOf("first", "cpu"); got != 6 {
		t.Fatalf("first uses %d cpu, want 6 (3 pods; its max is 6)", got)
	}
	c.deploy("second", 2, cpu("2"))
	if diff := cmp.Diff([]int64{4, 4}, []int64{c.usedOf("first", "cpu"), c.usedOf("second", "cpu")}); diff != "" {
		t.Errorf("cpu used by first, second (-want +got):\n%s", diff)
	}
}

func TestGPUOwnerReclaimsOneDevice(t *testing.T) {
	c := newCluster(t, flatTree("nvidia.com/gpu", "5", [3]string{"a", "4", "5"}, [3]string{"b", "1", "5"}))
	gpu := list("nvidia.com/gpu", "1")
	c.deploy("a", 5, gpu)
	c.deploy("b", 1, gpu)
	if diff := cmp.Diff([]string{"a"}, c.evicted); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4, 1}, c.runningIn("a", "b")); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
}

func TestGPUOwnersSettleOnTheirMins(t *testing.T) {
	c := newCluster(t, flatTree("nvidia.com/gpu", "10", [3]string{"a", "4", "6"}, [3]string{"b", "6", "8"}))
	gpu := list("nvidia.com/gpu", "1")
	c.deploy("a", 8, gpu)
	if got := c.usedOf("a", "nvidia.com/gpu"); got != 6 {
		t.Fatalf("a uses %d GPUs, want 6", got)
	}
	c.deploy("b", 8, gpu)
	if diff := cmp.Diff([]int64{4, 6}, []int64{c.usedOf("a", "nvidia.com/gpu"), c.usedOf("b", "nvidia.com/gpu")}); diff != "" {
		t.Errorf("GPUs used by a, b (-want +got):\n%s", diff)
	}
}
