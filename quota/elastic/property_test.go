package elastic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	"github.com/quotascale/quotascale/quota/resources"
)

var propertyResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"}

func quantityOf(name corev1.ResourceName, n int) resource.Quantity {
	if name == corev1.ResourceMemory {
		return resource.MustParse(fmt.Sprintf("%dMi", n))
	}
	return resource.MustParse(fmt.Sprint(n))
}

// drawTree draws a valid tree: every child's min comes out of what its
// parent's min has left, maxes are at least mins or absent (unlimited), and
// each leaf lists one namespace. It returns the namespaces of the leaves.
func drawTree(t *rapid.T) (*Tree, []string) {
	dims := rapid.SliceOfNDistinct(rapid.SampledFrom(propertyResources), 1, len(propertyResources), rapid.ID).Draw(t, "resources")
	root := spec{Name: "root", Min: corev1.ResourceList{}, Max: corev1.ResourceList{}}
	budget := map[corev1.ResourceName]int{}
	for _, d := range dims {
		capacity := rapid.IntRange(0, 40).Draw(t, "capacity "+string(d))
		root.Min[d], root.Max[d] = quantityOf(d, capacity), quantityOf(d, capacity)
		budget[d] = capacity
	}
	var namespaces []string
	var grow func(n *spec, depth int, budget map[corev1.ResourceName]int)
	grow = func(n *spec, depth int, budget map[corev1.ResourceName]int) {
		children := 0
		if depth < 4 {
			children = rapid.IntRange(0, 3).Draw(t, "children")
		}
		if depth == 1 && children == 0 {
			children = 1
		}
		for i := range children {
			child := spec{Name: fmt.Sprintf("%s.%d", n.Name, i), Min: corev1.ResourceList{}, Max: corev1.ResourceList{}}
			own := map[corev1.ResourceName]int{}
			for _, d := range dims {
				minimum := rapid.IntRange(0, budget[d]).Draw(t, "min")
				budget[d] -= minimum
				own[d] = minimum
				child.Min[d] = quantityOf(d, minimum)
				if rapid.IntRange(0, 3).Draw(t, "limited") > 0 {
					child.Max[d] = quantityOf(d, minimum+rapid.IntRange(0, 40).Draw(t, "over min"))
				}
			}
			grow(&child, depth+1, own)
			n.Children = append(n.Children, child)
		}
		if len(n.Children) == 0 {
			ns := fmt.Sprintf("ns-%d", len(namespaces))
			n.Namespaces = []string{ns}
			namespaces = append(namespaces, ns)
		}
	}
	grow(&root, 1, budget)
	tree, err := Build(treeOf(root))
	if err != nil {
		t.Fatalf("generated tree is invalid: %v", err)
	}
	return tree, namespaces
}

func drawRequest(t *rapid.T, label string) corev1.ResourceList {
	request := corev1.ResourceList{}
	for _, d := range propertyResources {
		if n := rapid.IntRange(0, 12).Draw(t, label+" "+string(d)); n > 0 {
			request[d] = quantityOf(d, n)
		}
	}
	return request
}

func drawSmallRequest(t *rapid.T, label string) corev1.ResourceList {
	request := corev1.ResourceList{}
	for _, d := range propertyResources {
		if n := rapid.IntRange(0, 4).Draw(t, label+" "+string(d)); n > 0 {
			request[d] = quantityOf(d, n)
		}
	}
	return request
}

type modelPod struct {
	namespace string
	requests  corev1.ResourceList
}

// expectedUsage sums the model's pods over every node's subtree.
func expectedUsage(tree *Tree, pods map[types.UID]modelPod) []resources.Vector {
	want := make([]resources.Vector, len(tree.shape.nodes))
	for pos := range want {
		want[pos] = tree.shape.index.Zero()
	}
	for _, p := range pods {
		leaf, ok := tree.shape.leafOf[p.namespace]
		if !ok {
			continue
		}
		request := tree.shape.index.Requests(p.requests)
		for pos := leaf; pos >= 0; pos = tree.shape.nodes[pos].parent {
			want[pos].Add(request)
		}
	}
	return want
}

func TestPropertyAdmittedUsageStaysWithinMaxAndAddsUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tree, namespaces := drawTree(t)
		candidates := append(slices.Clone(namespaces), "outside")
		pods := map[types.UID]modelPod{}
		var uids []types.UID
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for step := range steps {
			if len(uids) > 0 && rapid.IntRange(0, 2).Draw(t, "remove") == 0 {
				uid := rapid.SampledFrom(append(uids, "never-added")).Draw(t, "victim")
				tree.RemovePod(uid)
				delete(pods, uid)
			} else {
				uid := types.UID(fmt.Sprint("pod-", step))
				p := modelPod{namespace: rapid.SampledFrom(candidates).Draw(t, "namespace"), requests: drawRequest(t, "request")}
				if tree.Admit(p.namespace, p.requests).Admitted() {
					tree.AddRequests(uid, p.namespace, p.requests)
					tree.AddRequests(uid, p.namespace, p.requests) // idempotent
					pods[uid] = p
					uids = append(uids, uid)
				}
			}
			want := expectedUsage(tree, pods)
			for pos := range tree.shape.nodes {
				n := &tree.shape.nodes[pos]
				used := tree.usedAt(pos)
				if !used.Equal(want[pos]) {
					t.Fatalf("step %d: %s uses %v, its pods sum to %v", step, n.name, used, want[pos])
				}
				for d := range used {
					if used[d] > n.max[d] {
						t.Fatalf("step %d: %s over max on %s: %d > %d", step, n.name, tree.shape.index.Name(d), used[d], n.max[d])
					}
				}
			}
		}
	})
}

func TestPropertyReclaimKeepsVictimsMinsAndFitsThePreemptor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tree, namespaces := drawTree(t)
		var candidates []Candidate
		pods := map[types.UID]*corev1.Pod{}
		// leaving are victims of earlier plans still being deleted, as
		// evicted pods are for their grace period: they hold quota until
		// they are gone, and no later plan may count on them a second time.
		var leaving []types.UID
		// Many small pods fill the tree, so preemptors usually meet
		// contention and plans have several candidates to choose from.
		for i := range rapid.IntRange(0, 60).Draw(t, "pods") {
			ns := rapid.SampledFrom(namespaces).Draw(t, "namespace")
			requests := drawSmallRequest(t, "request")
			if !tree.Admit(ns, requests).Admitted() {
				continue
			}
			uid := types.UID(fmt.Sprint("pod-", i))
			pods[uid] = pod(string(uid), ns, requests)
			tree.AddPod(pods[uid])
			candidates = append(candidates, Candidate{
				UID:         uid,
				Priority:    int32(rapid.IntRange(0, 3).Draw(t, "priority")),
				Created:     time.Unix(int64(rapid.IntRange(0, 5).Draw(t, "created")), 0),
				ViolatesPDB: rapid.IntRange(0, 4).Draw(t, "pdb") == 0,
			})
		}
		// Several preemptors in turn, each plan applied before the next, so
		// one case checks plans against states that earlier reclaims shaped.
		for round := range rapid.IntRange(1, 10).Draw(t, "preemptors") {
			preemptor := drawPreemptor(t, tree, namespaces)
			fitsBefore := tree.Admit(preemptor.Namespace, preemptor.Requests).Admitted()
			plan, ok := tree.PlanReclaim(preemptor, candidates)
			if fitsBefore && (!ok || len(plan.Victims) > 0) {
				t.Fatalf("preemptor fits, yet plan = %v, %v", plan.Victims, ok)
			}
			if !ok {
				continue
			}
			checkPlan(t, tree, preemptor, candidates, leaving, plan)
			linger := rapid.Bool().Draw(t, "victims linger")
			for _, uid := range plan.Victims {
				if linger {
					evicted := pods[uid].DeepCopy()
					evicted.DeletionTimestamp = &metav1.Time{Time: time.Unix(int64(round), 0)}
					tree.AddPod(evicted)
					leaving = append(leaving, uid)
				} else {
					tree.RemovePod(uid)
				}
				candidates = slices.DeleteFunc(candidates, func(c Candidate) bool { return c.UID == uid })
			}
			if len(leaving) > 0 && rapid.Bool().Draw(t, "leaving pods gone") {
				for _, uid := range leaving {
					tree.RemovePod(uid)
				}
				leaving = nil
			}
			if !tree.Admit(preemptor.Namespace, preemptor.Requests).Admitted() {
				continue // waits for its victims to be gone
			}
			uid := types.UID(fmt.Sprint("preemptor-", round))
			pods[uid] = pod(string(uid), preemptor.Namespace, preemptor.Requests)
			tree.AddPod(pods[uid])
			candidates = append(candidates, Candidate{UID: uid, Priority: preemptor.Priority, Created: time.Unix(int64(10+round), 0)})
		}
	})
}

// drawPreemptor favours owners below their min asking for no more than
// their idle guarantee: those are the preemptors a reclaim plan serves.
func drawPreemptor(t *rapid.T, tree *Tree, namespaces []string) Preemptor {
	p := Preemptor{
		Namespace: rapid.SampledFrom(namespaces).Draw(t, "preemptor namespace"),
		Requests:  drawSmallRequest(t, "preemptor request"),
		Priority:  int32(rapid.IntRange(0, 3).Draw(t, "preemptor priority")),
	}
	if rapid.Bool().Draw(t, "owner below min") {
		leaf := tree.shape.leafOf[p.Namespace]
		n, used, index := &tree.shape.nodes[leaf], tree.usedAt(leaf), tree.shape.index
		p.Requests = corev1.ResourceList{}
		for d := range used {
			if idle := n.min[d] - used[d]; idle > 0 {
				// Whole units of the resource, as drawRequest uses.
				unit := index.Requests(quantityList(index.Name(d), 1))[d]
				if k := rapid.Int64Range(0, idle/unit).Draw(t, "idle share"); k > 0 {
					p.Requests[index.Name(d)] = index.Quantity(d, k*unit)
				}
			}
		}
	}
	return p
}

func quantityList(name corev1.ResourceName, n int) corev1.ResourceList {
	return corev1.ResourceList{name: quantityOf(name, n)}
}

// checkPlan verifies a plan against the rules it promises, on the usage left
// once the plan's victims and the pods already leaving are all gone.
func checkPlan(t *rapid.T, tree *Tree, preemptor Preemptor, candidates []Candidate, leaving []types.UID, plan Plan) {
	leaf := tree.shape.leafOf[preemptor.Namespace]
	onPath := map[int]bool{}
	for pos := leaf; pos >= 0; pos = tree.shape.nodes[pos].parent {
		onPath[pos] = true
	}
	after := tree.Scratch()
	for _, uid := range leaving {
		slot := tree.pods.slotOf[uid]
		after.release(tree.pods.records[slot].leaf, tree.pods.charge(slot))
	}
	// touched[pos][d]: some victim below pos (off the preemptor's path) frees d.
	touched := map[int][]bool{}
	for _, uid := range plan.Victims {
		slot := tree.pods.slotOf[uid]
		record, charge := tree.pods.records[slot], tree.pods.charge(slot)
		after.release(record.leaf, charge)
		if record.leaf == leaf {
			i := slices.IndexFunc(candidates, func(c Candidate) bool { return c.UID == uid })
			if candidates[i].Priority >= preemptor.Priority {
				t.Fatalf("victim %s of the preemptor's own leaf has priority %d >= %d", uid, candidates[i].Priority, preemptor.Priority)
			}
			continue
		}
		for pos := record.leaf; !onPath[pos]; pos = tree.shape.nodes[pos].parent {
			if touched[pos] == nil {
				touched[pos] = make([]bool, len(charge))
			}
			for d, c := range charge {
				touched[pos][d] = touched[pos][d] || c > 0
			}
		}
	}
	for pos, dims := range touched {
		n, used := &tree.shape.nodes[pos], after.usedAt(pos)
		for d, hit := range dims {
			if hit && used[d] < n.min[d] {
				t.Fatalf("plan %v pushes %s below its min on %s: %d < %d", plan.Victims, n.name, tree.shape.index.Name(d), used[d], n.min[d])
			}
		}
	}
	if v := after.Admit(preemptor.Namespace, preemptor.Requests); !v.Admitted() {
		t.Fatalf("preemptor does not fit after plan %v: %s", plan.Victims, v.Message())
	}
	for _, uid := range plan.Victims {
		slot := tree.pods.slotOf[uid]
		record, charge := tree.pods.records[slot], tree.pods.charge(slot)
		after.charge(record.leaf, charge)
		if after.Admit(preemptor.Namespace, preemptor.Requests).Admitted() {
			t.Fatalf("plan %v is not minimal: %s is not needed", plan.Victims, uid)
		}
		after.release(record.leaf, charge)
	}
}
