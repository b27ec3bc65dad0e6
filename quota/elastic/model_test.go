package elastic

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

var (
	modelSeed = flag.Uint64("elastic.model.seed", 1, "seed of TestModel; 0 picks one from the clock (printed)")
	modelOps  = flag.Int("elastic.model.ops", 10000, "operations TestModel runs")
)

// The reference model below is deliberately naive: a spec is a list of nodes
// with parent links and plain maps; usage is recomputed from the list of pods
// on every question by walking each pod's path to the root; admission walks
// the path and compares sums. It shares no code with the library. Amounts are
// int64 in the resource's natural unit: millicores for cpu, bytes for memory,
// a count for nvidia.com/gpu. Generated quantities are whole in those units,
// so no rounding is involved.

var (
	// refResources may appear in trees; example.com/widget only ever appears
	// in requests, so it is never limited nor counted.
	refResources   = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"}
	refUnnamed     = corev1.ResourceName("example.com/widget")
	refNamespaces  = []string{"ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9", "ns10", "ns11"}
	refPodMaxCount = 120
)

type refNode struct {
	name       string
	parent     int // -1 for the root
	min, max   map[corev1.ResourceName]int64
	namespaces []string
	children   []int
}

// refSpec is a valid tree, nodes in preorder, nodes[0] the root.
type refSpec struct{ nodes []refNode }

type refPod struct {
	namespace string
	requests  map[corev1.ResourceName]int64
}

type refExcess struct {
	Node      string
	Resources []refResourceExcess
}

type refResourceExcess struct {
	Resource             corev1.ResourceName
	Used, Requested, Max int64
}

type refVerdict struct {
	Governed bool
	Leaf     string
	Excesses []refExcess
}

// leafOf scans for the leaf listing namespace.
func (s *refSpec) leafOf(namespace string) int {
	for i, n := range s.nodes {
		if slices.Contains(n.namespaces, namespace) {
			return i
		}
	}
	return -1
}

// resources are the names written in any min or max: what the tree counts.
func (s *refSpec) resources() []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range s.nodes {
		for name := range n.min {
			out = append(out, name)
		}
		for name := range n.max {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// used sums, for every node, the requests of the pods whose leaf is at or
// below it, on the resources the tree counts.
func (s *refSpec) used(pods map[types.UID]refPod) []map[corev1.ResourceName]int64 {
	counted := s.resources()
	out := make([]map[corev1.ResourceName]int64, len(s.nodes))
	for i := range out {
		out[i] = map[corev1.ResourceName]int64{}
	}
	for _, p := range pods {
		for pos := s.leafOf(p.namespace); pos >= 0; pos = s.nodes[pos].parent {
			for name, amount := range p.requests {
				if slices.Contains(counted, name) {
					out[pos][name] += amount
				}
			}
		}
	}
	return out
}

// admit walks the path from the namespace's leaf to the root and names, per
// node, every requested resource whose used + request passes a written max.
func (s *refSpec) admit(pods map[types.UID]refPod, namespace string, requests map[corev1.ResourceName]int64) refVerdict {
	leaf := s.leafOf(namespace)
	if leaf < 0 {
		return refVerdict{}
	}
	used := s.used(pods)
	v := refVerdict{Governed: true, Leaf: s.nodes[leaf].name}
	for pos := leaf; pos >= 0; pos = s.nodes[pos].parent {
		var over []refResourceExcess
		for _, name := range refSortedKeys(requests) {
			maximum, limited := s.nodes[pos].max[name]
			if r := requests[name]; r > 0 && limited && used[pos][name]+r > maximum {
				over = append(over, refResourceExcess{Resource: name, Used: used[pos][name], Requested: r, Max: maximum})
			}
		}
		if len(over) > 0 {
			v.Excesses = append(v.Excesses, refExcess{Node: s.nodes[pos].name, Resources: over})
		}
	}
	return v
}

// status is what ElasticQuotaTree.status.quotas must say for every node.
func (s *refSpec) status(pods map[types.UID]refPod) []schedulingv1beta1.QuotaNodeStatus {
	counted := s.resources()
	used := s.used(pods)
	var out []schedulingv1beta1.QuotaNodeStatus
	for i, n := range s.nodes {
		st := schedulingv1beta1.QuotaNodeStatus{
			Name: n.name, Used: corev1.ResourceList{}, Min: refAmounts(n.min), Max: refAmounts(n.max),
			Borrowed: corev1.ResourceList{}, Lent: corev1.ResourceList{},
		}
		if n.parent >= 0 {
			st.Parent = s.nodes[n.parent].name
		}
		for _, name := range counted {
			_, inMin := n.min[name]
			_, inMax := n.max[name]
			u := used[i][name]
			if inMin || inMax || u > 0 {
				st.Used[name] = refAmount(name, u)
			}
			if u > n.min[name] {
				st.Borrowed[name] = refAmount(name, u-n.min[name])
			}
			if n.min[name] > u {
				st.Lent[name] = refAmount(name, n.min[name]-u)
			}
		}
		out = append(out, st)
	}
	return out
}

func refSortedKeys(m map[corev1.ResourceName]int64) []corev1.ResourceName {
	keys := make([]corev1.ResourceName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// refQuantity writes an amount the way a person would, so the library parses
// real-looking quantities: "1500m", "768Mi", "3".
func refQuantity(name corev1.ResourceName, amount int64) resource.Quantity {
	switch name {
	case corev1.ResourceCPU:
		return resource.MustParse(fmt.Sprintf("%dm", amount))
	case corev1.ResourceMemory:
		if amount%(1<<20) == 0 {
			return resource.MustParse(fmt.Sprintf("%dMi", amount>>20))
		}
	}
	return resource.MustParse(fmt.Sprint(amount))
}

// refAmount is an expected figure; it is compared by value, so it need not
// be spelled like anything.
func refAmount(name corev1.ResourceName, amount int64) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(amount, resource.DecimalSI)
	}
	return *resource.NewQuantity(amount, resource.DecimalSI)
}

func refAmounts(m map[corev1.ResourceName]int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, amount := range m {
		out[name] = refAmount(name, amount)
	}
	return out
}

// refInMilli shows quantities in a diff as one comparable number each.
var refInMilli = cmp.Transformer("milli", func(q resource.Quantity) int64 { return q.MilliValue() })

// refSameStatus compares figures by value. It is what runs after every
// operation; go-cmp, much slower, only explains a difference.
func refSameStatus(a, b []schedulingv1beta1.QuotaNodeStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Name != y.Name || x.Parent != y.Parent || !refSameList(x.Used, y.Used) || !refSameList(x.Min, y.Min) ||
			!refSameList(x.Max, y.Max) || !refSameList(x.Borrowed, y.Borrowed) || !refSameList(x.Lent, y.Lent) {
			return false
		}
	}
	return true
}

func refSameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		other, ok := b[name]
		if !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

func refList(m map[corev1.ResourceName]int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, amount := range m {
		out[name] = refQuantity(name, amount)
	}
	return out
}

// toAPI writes the spec as the object the scheduler would receive.
func (s *refSpec) toAPI() *schedulingv1beta1.ElasticQuotaTree {
	var build func(i int) schedulingv1beta1.ElasticQuotaSpec
	build = func(i int) schedulingv1beta1.ElasticQuotaSpec {
		n := s.nodes[i]
		out := schedulingv1beta1.ElasticQuotaSpec{Name: n.name, Namespaces: slices.Clone(n.namespaces)}
		if len(n.min) > 0 {
			out.Min = refList(n.min)
		}
		if len(n.max) > 0 {
			out.Max = refList(n.max)
		}
		for _, c := range n.children {
			out.Children = append(out.Children, build(c))
		}
		return out
	}
	return treeOf(build(0))
}

// refUnit is one step of a generated amount of name.
func refUnit(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return 250 // millicores
	case corev1.ResourceMemory:
		return 256 << 20
	}
	return 1
}

// refGenSpec draws a valid tree: the root's min equals its max, every child's min
// comes out of what its parent's min has left, maxes are at least mins or
// absent, names are unique, and leaves take distinct namespaces from the pool
// (some are left out, so some pods are not governed).
func refGenSpec(r *rand.Rand) refSpec {
	var dims []corev1.ResourceName
	for _, name := range refResources {
		if r.IntN(4) > 0 {
			dims = append(dims, name)
		}
	}
	if len(dims) == 0 {
		dims = refResources[:1]
	}
	pool := slices.Clone(refNamespaces)
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	s := refSpec{}
	root := refNode{name: "root", parent: -1, min: map[corev1.ResourceName]int64{}, max: map[corev1.ResourceName]int64{}}
	for _, d := range dims {
		capacity := r.Int64N(33) * refUnit(d)
		root.min[d], root.max[d] = capacity, capacity
	}
	s.nodes = append(s.nodes, root)
	var grow func(pos, depth int)
	grow = func(pos, depth int) {
		children := 0
		if depth < 4 {
			children = r.IntN(4)
		}
		if depth == 1 && children == 0 {
			children = 1
		}
		left := map[corev1.ResourceName]int64{}
		for name, amount := range s.nodes[pos].min {
			left[name] = amount
		}
		for range children {
			child := refNode{name: fmt.Sprintf("n%d", len(s.nodes)), parent: pos,
				min: map[corev1.ResourceName]int64{}, max: map[corev1.ResourceName]int64{}}
			for _, d := range dims {
				steps := left[d] / refUnit(d)
				if r.IntN(4) > 0 {
					child.min[d] = r.Int64N(steps+1) * refUnit(d)
					left[d] -= child.min[d]
				}
				if r.IntN(3) > 0 {
					child.max[d] = child.min[d] + r.Int64N(20)*refUnit(d)
				}
			}
			at := len(s.nodes)
			s.nodes = append(s.nodes, child)
			s.nodes[pos].children = append(s.nodes[pos].children, at)
			grow(at, depth+1)
		}
		if len(s.nodes[pos].children) == 0 && pos > 0 {
			for range r.IntN(3) {
				if len(pool) > 2 { // keep two namespaces ungoverned
					s.nodes[pos].namespaces = append(s.nodes[pos].namespaces, pool[0])
					pool = pool[1:]
				}
			}
		}
	}
	grow(0, 1)
	return s
}

// refBreakSpec returns s as an API object broken by one rule the documentation
// states, chosen at random, so the reference knows it is invalid by
// construction rather than by re-implementing validation.
func refBreakSpec(r *rand.Rand, s refSpec) (*schedulingv1beta1.ElasticQuotaTree, string) {
	obj := s.toAPI()
	var nodes []*schedulingv1beta1.ElasticQuotaSpec
	var walk func(n *schedulingv1beta1.ElasticQuotaSpec)
	walk = func(n *schedulingv1beta1.ElasticQuotaSpec) {
		nodes = append(nodes, n)
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	walk(&obj.Spec.Root)
	victim := nodes[1+r.IntN(len(nodes)-1)] // never the root: it has children
	switch r.IntN(5) {
	case 0:
		victim.Name = nodes[0].Name
		return obj, "duplicate name"
	case 1:
		victim.Name = ""
		return obj, "empty name"
	case 2:
		if victim.Max == nil {
			victim.Max = corev1.ResourceList{}
		}
		victim.Max[corev1.ResourceCPU] = resource.MustParse("1")
		victim.Min = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		return obj, "min above max"
	case 3:
		root := &obj.Spec.Root
		if root.Max == nil {
			root.Max = corev1.ResourceList{}
		}
		q := root.Max[corev1.ResourceMemory]
		q.Add(resource.MustParse("1Mi"))
		root.Max[corev1.ResourceMemory] = q
		return obj, "root max differs from min"
	default:
		nodes[0].Namespaces = append(nodes[0].Namespaces, "ns0")
		return obj, "namespaces on the root, which has children"
	}
}

func refGenRequests(r *rand.Rand) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, name := range append(slices.Clone(refResources), refUnnamed) {
		if r.IntN(3) > 0 {
			out[name] = r.Int64N(6) * refUnit(name)
		}
	}
	return out
}

func refPodOf(uid types.UID, p refPod, phase corev1.PodPhase) *corev1.Pod {
	out := pod(string(uid), p.namespace, refList(p.requests))
	out.Status.Phase = phase
	return out
}

func refVerdictOf(v Verdict) refVerdict {
	out := refVerdict{Governed: v.Governed(), Leaf: v.Leaf}
	for _, e := range v.Excesses {
		x := refExcess{Node: e.Node}
		for _, re := range e.Resources {
			x.Resources = append(x.Resources, refResourceExcess{Resource: re.Resource,
				Used: refInUnits(re.Resource, re.Used), Requested: refInUnits(re.Resource, re.Requested), Max: refInUnits(re.Resource, re.Max)})
		}
		out.Excesses = append(out.Excesses, x)
	}
	return out
}

func refInUnits(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// TestModel drives one tree through random operations and compares it with
// the reference after every one: the figures of every node (used, min, max,
// borrowed, lent), and, for admissions, the verdict down to which nodes and
// resources are exceeded and by what numbers. Operations: add or update a
// pod (sometimes one that has finished, which releases it), remove a pod,
// admit, replace the spec with a valid or an invalid one (an invalid one
// must leave everything as it was), and restart (build the current spec from
// scratch and add every pod again, in another order). A failure prints the
// seed and the last operations; rerun with -elastic.model.seed.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -elastic.model.seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	spec := refGenSpec(r)
	tree := mustBuild(t, spec.toAPI())
	pods := map[types.UID]refPod{}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		start := max(0, len(log)-15)
		t.Fatalf("seed %d, operation %d: %s\nlast operations:\n  %s", seed, len(log), fmt.Sprintf(format, args...), strings.Join(log[start:], "\n  "))
	}
	counts := map[string]int{}
	nextUID := 0
	for range *modelOps {
		var op string
		switch k := r.IntN(100); {
		case k < 35 || len(pods) == 0:
			// Add a new pod, or update an existing one in place (another
			// namespace or other requests, as an informer update can).
			uid := types.UID(fmt.Sprintf("pod-%d", nextUID))
			if len(pods) > 0 && r.IntN(4) == 0 {
				uid = refPickPod(r, pods)
			} else {
				nextUID++
			}
			p := refPod{namespace: refPickNamespace(r), requests: refGenRequests(r)}
			phase := corev1.PodRunning
			if r.IntN(10) == 0 {
				phase = corev1.PodSucceeded
			}
			// Mostly as the scheduler does, admit first and place only what
			// fits, so the tree spends time near its limits; otherwise as an
			// informer reports a pod placed by someone else, unchecked.
			if r.IntN(10) < 7 {
				want := spec.admit(pods, p.namespace, p.requests)
				if got := refVerdictOf(tree.Admit(p.namespace, refList(p.requests))); !cmp.Equal(want, got) {
					fail("admit %s before adding it: verdict (-reference +library):\n%s", uid, cmp.Diff(want, got))
				}
				if len(want.Excesses) > 0 {
					log = append(log, fmt.Sprintf("%s in %s requesting %v does not fit", uid, p.namespace, p.requests))
					counts["refused"]++
					continue
				}
			}
			counted := tree.AddPod(refPodOf(uid, p, phase))
			if phase == corev1.PodSucceeded {
				delete(pods, uid)
			} else {
				pods[uid] = p
			}
			op = fmt.Sprintf("add %s in %s requesting %v (%s)", uid, p.namespace, p.requests, phase)
			if want := phase != corev1.PodSucceeded && spec.leafOf(p.namespace) >= 0; counted != want {
				fail("%s: AddPod = %v, want %v", op, counted, want)
			}
		case k < 55 || len(pods) > refPodMaxCount:
			uid := types.UID("never-added")
			if r.IntN(10) > 0 {
				uid = refPickPod(r, pods)
			}
			_, want := pods[uid]
			delete(pods, uid)
			op = fmt.Sprintf("remove %s", uid)
			if got := tree.RemovePod(uid); got != want {
				fail("%s: RemovePod = %v, want %v", op, got, want)
			}
		case k < 85:
			namespace, requests := refPickNamespace(r), refGenRequests(r)
			op = fmt.Sprintf("admit in %s %v", namespace, requests)
			want := spec.admit(pods, namespace, requests)
			got := refVerdictOf(tree.Admit(namespace, refList(requests)))
			if diff := cmp.Diff(want, got); diff != "" {
				fail("%s: verdict (-reference +library):\n%s", op, diff)
			}
			counts["admitted"] += map[bool]int{true: 1}[len(got.Excesses) == 0 && got.Governed]
			counts["refused"] += map[bool]int{true: 1}[len(got.Excesses) > 0]
		case k < 95:
			if r.IntN(3) == 0 {
				broken, why := refBreakSpec(r, spec)
				op = "update to an invalid spec: " + why
				next, err := tree.Rebuild(broken)
				if err == nil || next != nil {
					fail("%s: Rebuild accepted it", op)
				}
				counts["invalid updates"]++
			} else {
				next := refGenSpec(r)
				op = fmt.Sprintf("update to a valid spec of %d nodes", len(next.nodes))
				rebuilt, err := tree.Rebuild(next.toAPI())
				if err != nil {
					fail("%s: %v", op, err)
				}
				tree, spec = rebuilt, next
				counts["valid updates"]++
			}
		default:
			op = "restart"
			tree = mustBuild(t, spec.toAPI())
			uids := make([]types.UID, 0, len(pods))
			for uid := range pods {
				uids = append(uids, uid)
			}
			slices.Sort(uids)
			r.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
			for _, uid := range uids {
				tree.AddPod(refPodOf(uid, pods[uid], corev1.PodRunning))
			}
			counts["restarts"]++
		}
		log = append(log, op)
		if want, got := spec.status(pods), tree.Status(); !refSameStatus(want, got) {
			fail("after %s: status in milli-units (-reference +library):\n%s", op, cmp.Diff(want, got, refInMilli, cmpopts.EquateEmpty()))
		}
		if got := tree.PodCount(); got != len(pods) {
			fail("after %s: PodCount = %d, reference tracks %d", op, got, len(pods))
		}
	}
	// A run in which one branch never happened would prove little.
	for _, what := range []string{"admitted", "refused", "invalid updates", "valid updates", "restarts"} {
		if counts[what] == 0 {
			t.Errorf("no %s in %d operations", what, *modelOps)
		}
	}
	t.Logf("%d operations: %v", *modelOps, counts)
}

func refPickPod(r *rand.Rand, pods map[types.UID]refPod) types.UID {
	uids := make([]types.UID, 0, len(pods))
	for uid := range pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids[r.IntN(len(uids))]
}

func refPickNamespace(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		return "outside"
	}
	return refNamespaces[r.IntN(len(refNamespaces))]
}
