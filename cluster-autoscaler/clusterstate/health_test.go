package clusterstate

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
)

// group is a node group that only has a name; health reads nothing else.
type group struct {
	cloudprovider.NodeGroup
	id string
}

func (g group) Id() string { return g.id }

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// upstream's defaults: 45% and 3 nodes, 15 minutes to start.
var defaultHealth = HealthOptions{MaxTotalUnreadyPercentage: 45, OkTotalUnreadyCount: 3, MaxNodeStartupTime: 15 * time.Minute}

type nodeKind int

const (
	ready nodeKind = iota
	unready
	starting // not ready, created a minute ago
	suspended
	deleting
	gpuMissing // ready, but its GPU label promises a GPU that is not allocatable
)

func node(i int, kind nodeKind) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	cond := corev1.ConditionTrue
	switch kind {
	case unready:
		cond = corev1.ConditionFalse
	case starting:
		cond = corev1.ConditionFalse
		n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	case suspended:
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "Suspended", Status: corev1.ConditionTrue})
	case deleting:
		n.Spec.Taints = []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}
	case gpuMissing:
		n.Labels = map[string]string{"cluster-api/accelerator": "a100"}
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: cond})
	return n
}

func nodes(kinds map[nodeKind]int) []*corev1.Node {
	var out []*corev1.Node
	for _, k := range []nodeKind{ready, unready, starting, suspended, deleting, gpuMissing} {
		for i := 0; i < kinds[k]; i++ {
			out = append(out, node(len(out), k))
		}
	}
	return out
}

func instances(n int) []cloudprovider.Instance {
	out := make([]cloudprovider.Instance, n)
	for i := range out {
		out[i] = cloudprovider.Instance{Id: fmt.Sprintf("late-%d", i)}
	}
	return out
}

// TestClusterHealth: the cluster is unhealthy only when more than
// --ok-total-unready-count nodes are unready and they are more than
// --max-total-unready-percentage of all nodes; starting nodes are not
// unready.
func TestClusterHealth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   map[nodeKind]int
		opts    HealthOptions
		healthy bool
	}{
		{"4 of 10 unready: more than 3, not more than 45%", map[nodeKind]int{ready: 6, unready: 4}, defaultHealth, true},
		{"5 of 10 unready: more than 45%", map[nodeKind]int{ready: 5, unready: 5}, defaultHealth, false},
		{"3 of 3 unready: not more than 3", map[nodeKind]int{unready: 3}, defaultHealth, true},
		{"4 of 4 unready", map[nodeKind]int{unready: 4}, defaultHealth, false},
		{"6 of 10 starting", map[nodeKind]int{ready: 4, starting: 6}, defaultHealth, true},
		{"suspended and deleting nodes are not unready", map[nodeKind]int{suspended: 5, deleting: 5}, defaultHealth, true},
		{"a ready node without its GPU is unready", map[nodeKind]int{ready: 5, gpuMissing: 5}, defaultHealth, false},
		{"--ok-total-unready-count=0, 1 of 2 unready: not more than 50%", map[nodeKind]int{ready: 1, unready: 1},
			HealthOptions{MaxTotalUnreadyPercentage: 50, MaxNodeStartupTime: time.Minute}, true},
		{"--max-total-unready-percentage=10, 4 of 20 unready", map[nodeKind]int{ready: 16, unready: 4},
			HealthOptions{MaxTotalUnreadyPercentage: 10, OkTotalUnreadyCount: 3, MaxNodeStartupTime: time.Minute}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(Options{MaxNodeProvisionTime: 15 * time.Minute})
			h := r.CheckHealth(tc.opts, &State{Now: now}, nodes(tc.nodes))
			if h.ClusterHealthy != tc.healthy {
				t.Errorf("healthy %v, want %v (readiness %+v)", h.ClusterHealthy, tc.healthy, h.Cluster)
			}
		})
	}
}

func TestReadinessCategories(t *testing.T) {
	r := NewRegistry(Options{MaxNodeProvisionTime: 15 * time.Minute})
	all := nodes(map[nodeKind]int{ready: 2, unready: 3, starting: 1, suspended: 1, deleting: 1, gpuMissing: 1})
	g := &GroupState{Group: group{id: "g"}, Target: 12, Nodes: all,
		Unregistered: append(instances(3), cloudprovider.Instance{Id: "failed"}),
		Late:         instances(2),
		Failed:       []cloudprovider.Instance{{Id: "failed"}},
	}
	h := r.CheckHealth(defaultHealth, &State{Now: now, Groups: []*GroupState{g}}, all)
	want := Readiness{Registered: 9, Ready: 2, Unready: 4, ResourceUnready: 1, NotStarted: 1, Suspended: 1, Deleted: 1,
		LongUnregistered: 2, Unregistered: 1}
	if diff := cmp.Diff(want, h.Cluster); diff != "" {
		t.Errorf("cluster readiness (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, h.Groups["g"].Readiness); diff != "" {
		t.Errorf("group readiness (-want +got):\n%s", diff)
	}
}

// TestNodeGroupHealth: a group is unhealthy when its ready (and suspended)
// nodes fall short of the target less the instances past their provisioning
// time and the nodes of a scale-up in progress, by more than 3 and more than
// 45% of its registered nodes.
func TestNodeGroupHealth(t *testing.T) {
	for _, tc := range []struct {
		name        string
		target      int
		nodes       map[nodeKind]int
		late        int
		increase    int
		increaseDue time.Duration // after now; negative is overdue
		wantHealthy bool
	}{
		{name: "at target, all ready", target: 5, nodes: map[nodeKind]int{ready: 5}, wantHealthy: true},
		{name: "6 of 10 unready", target: 10, nodes: map[nodeKind]int{ready: 4, unready: 6}},
		{name: "3 of 10 unready: not more than 3", target: 10, nodes: map[nodeKind]int{ready: 7, unready: 3}, wantHealthy: true},
		{name: "6 missing, 4 ready: a scale-up by 6 in progress", target: 10, nodes: map[nodeKind]int{ready: 4},
			increase: 6, increaseDue: time.Minute, wantHealthy: true},
		{name: "6 missing, 4 ready: the scale-up is overdue", target: 10, nodes: map[nodeKind]int{ready: 4},
			increase: 6, increaseDue: -time.Minute},
		{name: "6 missing, no scale-up", target: 10, nodes: map[nodeKind]int{ready: 4}},
		{name: "6 instances past their provisioning time", target: 10, nodes: map[nodeKind]int{ready: 4}, late: 6, wantHealthy: true},
		{name: "no node yet, target 3, no scale-up", target: 3},
		{name: "no node yet, target 3, scale-up by 3", target: 3, increase: 3, increaseDue: time.Minute, wantHealthy: true},
		{name: "no node, target 0", target: 0, wantHealthy: true},
		{name: "a finished scale-up ends", target: 4, nodes: map[nodeKind]int{ready: 4}, increase: 2, increaseDue: time.Minute, wantHealthy: true},
		{name: "a node that has not started keeps the scale-up going", target: 4, nodes: map[nodeKind]int{ready: 3, starting: 1},
			increase: 1, increaseDue: time.Minute, wantHealthy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(Options{MaxNodeProvisionTime: 15 * time.Minute})
			if tc.increase > 0 {
				r.RegisterScaleUp("g", tc.target, tc.increase, now.Add(tc.increaseDue-15*time.Minute))
			}
			ns := nodes(tc.nodes)
			g := &GroupState{Group: group{id: "g"}, Target: tc.target, Nodes: ns, Unregistered: instances(tc.late), Late: instances(tc.late)}
			h := r.CheckHealth(defaultHealth, &State{Now: now, Groups: []*GroupState{g}}, ns)
			if got := h.Groups["g"].Healthy; got != tc.wantHealthy {
				t.Errorf("healthy %v, want %v (readiness %+v)", got, tc.wantHealthy, h.Groups["g"].Readiness)
			}
		})
	}
}

// TestStatusDocument: the document has upstream's shape: keys, statuses,
// node counts, the scale-up state of each group, and transition times kept
// while a status stays.
func TestStatusDocument(t *testing.T) {
	r := NewRegistry(Options{MaxNodeProvisionTime: 15 * time.Minute, Backoff: BackoffOptions{Initial: 5 * time.Minute, Max: 30 * time.Minute, Reset: 3 * time.Hour}})
	earlier := now.Add(-10 * time.Minute)
	r.RegisterScaleUp("growing", 3, 2, earlier)
	r.RegisterFailedScaleUp("stuck", 1, fmt.Errorf("quota of the cloud account"), now.Add(-time.Minute))
	growing := nodes(map[nodeKind]int{ready: 1})
	sick := nodes(map[nodeKind]int{ready: 1, unready: 4})
	for _, n := range sick {
		n.Name = "sick-" + n.Name
	}
	state := &State{Now: now, Groups: []*GroupState{
		{Group: group{id: "growing"}, Target: 3, Min: 1, Max: 5, Nodes: growing, Unregistered: instances(1)},
		{Group: group{id: "sick"}, Target: 5, Min: 0, Max: 10, Nodes: sick},
		{Group: group{id: "stuck"}, Target: 0, Min: 0, Max: 3},
	}}
	r.last = state
	// 4 nodes no group manages: 4 unready of 10 keep the cluster healthy.
	unmanaged := nodes(map[nodeKind]int{ready: 4})
	for _, n := range unmanaged {
		n.Name = "unmanaged-" + n.Name
	}
	h := r.CheckHealth(defaultHealth, state, append(append(growing, sick...), unmanaged...))
	previous := api.Status{ClusterWide: api.ClusterWideStatus{Health: api.HealthCondition{Status: api.Healthy, LastTransitionTime: metav1.NewTime(earlier)}}}
	doc, err := yaml.Marshal(r.Status(h, map[string]int{"sick": 1}, previous))
	if err != nil {
		t.Fatal(err)
	}
	want := `autoscalerStatus: Running
clusterWide:
  health:
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T11:50:00Z"
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 6
        suspended: 0
        total: 10
        unready:
          resourceUnready: 0
          total: 4
      unregistered: 1
    status: Healthy
  scaleDown:
    candidates: 1
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: CandidatesPresent
  scaleUp:
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: InProgress
nodeGroups:
- health:
    cloudProviderTarget: 3
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    maxSize: 5
    minSize: 1
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 1
        suspended: 0
        total: 1
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 1
    status: Healthy
  name: growing
  scaleDown:
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: NoCandidates
  scaleUp:
    backoffInfo: {}
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: InProgress
- health:
    cloudProviderTarget: 5
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    maxSize: 10
    minSize: 0
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 1
        suspended: 0
        total: 5
        unready:
          resourceUnready: 0
          total: 4
      unregistered: 0
    status: Unhealthy
  name: sick
  scaleDown:
    candidates: 1
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: CandidatesPresent
  scaleUp:
    backoffInfo: {}
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: Unhealthy
- health:
    cloudProviderTarget: 0
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    maxSize: 3
    minSize: 0
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 0
        suspended: 0
        total: 0
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 0
    status: Healthy
  name: stuck
  scaleDown:
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: NoCandidates
  scaleUp:
    backoffInfo:
      errorCode: cloudProviderError
      errorMessage: quota of the cloud account
    lastProbeTime: "2026-12-01T12:00:00Z"
    lastTransitionTime: "2026-12-01T12:00:00Z"
    status: Backoff
`
	if diff := cmp.Diff(want, string(doc)); diff != "" {
		t.Errorf("status document (-want +got):\n%s", diff)
	}
}

func TestTruncate(t *testing.T) {
	long := string(make([]byte, 600))
	got := truncate(long, maxErrorMessageSize)
	if len(got) != 500 || got[500-len("<truncated>"):] != "<truncated>" {
		t.Errorf("truncated to %d bytes ending %q", len(got), got[len(got)-11:])
	}
	if truncate("short", 500) != "short" {
		t.Error("a short message was changed")
	}
}
