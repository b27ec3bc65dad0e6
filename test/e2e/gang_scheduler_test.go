package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8sscheduling "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/quota/gang"
)

// The scheduler's side of gangs under an ElasticQuotaTree (issue 27): the
// tree admits a gang whole or not at all, with the real kube-scheduler, its
// GangScheduling plugin and CapacityScheduling, each judged by test/oracle.

// gangTreeManifest is a tree whose leaf "gang-team" governs ns with the given
// min and max cpu, and whose leaf "gang-other" governs other (when set).
func gangTreeManifest(ns, teamMin, teamMax, other string) []byte {
	children := fmt.Sprintf("    - {name: gang-team, namespaces: [%s], min: {cpu: %s}, max: {cpu: %s}}\n", ns, teamMin, teamMax)
	if other != "" {
		children += fmt.Sprintf("    - {name: gang-other, namespaces: [%s], min: {cpu: 4}, max: {cpu: 16}}\n", other)
	}
	return []byte(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
` + children)
}

// gangNode is a node of 16 cpu only the pods of this file's tests select.
func gangNode(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	createNodes(t, ctx, localcluster.NodeSpec{Name: name, Labels: map[string]string{"e2e-gang-sched": name},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}})
}

// gangMembers creates n pods of 2 cpu in ns on node, named prefix-i, made
// members of a gang by member.
func gangMembers(t *testing.T, ctx context.Context, ns, node, prefix string, n int, member func(*corev1.Pod)) []string {
	t.Helper()
	return createGangPods(t, ctx, ns, prefix, n, "2", map[string]string{"e2e-gang-sched": node}, member)
}

func inPodGroup(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)} }
}

func withACKLabels(name string, minAvailable int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[gang.LabelName], p.Labels[gang.LabelMinAvailable] = name, fmt.Sprint(minAvailable)
	}
}

func createGangPodGroup(t *testing.T, ctx context.Context, ns, name string, minCount int32) {
	t.Helper()
	pg := &k8sscheduling.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: k8sscheduling.PodGroupSpec{SchedulingPolicy: k8sscheduling.PodGroupSchedulingPolicy{
			Gang: &k8sscheduling.GangSchedulingPolicy{MinCount: minCount}}}}
	if _, err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
}

// boundAmong counts the named pods of ns bound to a node.
func boundAmong(ctx context.Context, ns string, names []string) (int, error) {
	n := 0
	for _, name := range names {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// eventsNaming waits until every named pod has an event whose message holds
// every one of want.
func eventsNaming(t *testing.T, ctx context.Context, ns string, pods []string, want ...string) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("an event on each pod naming %q", want), func(ctx context.Context) error {
		events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		named := map[string]bool{}
		var seen []string
		for _, e := range events.Items {
			all := true
			for _, w := range want {
				all = all && strings.Contains(e.Message, w)
			}
			if all {
				named[e.InvolvedObject.Name] = true
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		for _, p := range pods {
			if !named[p] {
				return fmt.Errorf("pod %s has no such event; events: %q", p, seen)
			}
		}
		return nil
	})
}

// leafUsedCPU is the cpu the tree's status shows used at quota node name.
func leafUsedCPU(ctx context.Context, name string) (string, error) {
	tree, err := getTree(ctx, "kube-system", "elasticquotatree")
	if err != nil {
		return "", err
	}
	for _, q := range tree.Status.Quotas {
		if q.Name == name {
			cpu := q.Used[corev1.ResourceCPU]
			return cpu.String(), nil
		}
	}
	return "", fmt.Errorf("quota node %s not in the tree's status", name)
}

// refusedWholeThenAdmitted is the first acceptance case for either kind of
// gang: leaf max 6 cpu, a gang of 4 x 2 cpu: no pod bound, no usage for it,
// each pod told the gang, the leaf and cpu; max 8 binds all 4. prepare
// readies the namespace and says how a pod joins the gang "train".
func refusedWholeThenAdmitted(t *testing.T, prepare func(ctx context.Context, ns string) func(*corev1.Pod)) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	node := "gang-sched-" + ns[len(ns)-5:]
	gangNode(t, ctx, node)
	applyTree(t, ctx, gangTreeManifest(ns, "2", "6", ""))
	invariants(t)
	pods := gangMembers(t, ctx, ns, node, "worker", 4, prepare(ctx, ns))

	eventsNaming(t, ctx, ns, pods, "gang "+ns+"/train", `"gang-team"`, "cpu")
	settle(t, ctx, "no pod of the gang bound", func(ctx context.Context) error {
		if n, err := boundAmong(ctx, ns, pods); err != nil || n != 0 {
			return fmt.Errorf("%d pods bound (%v)", n, err)
		}
		return nil
	})
	waitFor(t, ctx, "the tree's status showing no usage for the gang", func(ctx context.Context) error {
		used, err := leafUsedCPU(ctx, "gang-team")
		if err == nil && used != "0" {
			err = fmt.Errorf("gang-team used cpu %s", used)
		}
		return err
	})

	apply(t, ctx, gangTreeManifest(ns, "2", "8", ""))
	waitFor(t, ctx, "all 4 pods bound once max is 8", func(ctx context.Context) error {
		return podsBound(ctx, ns, pods...)
	})
}

func TestGangSchedulerPodGroupRefusedWholeThenAdmitted(t *testing.T) {
	refusedWholeThenAdmitted(t, func(ctx context.Context, ns string) func(*corev1.Pod) {
		createGangPodGroup(t, ctx, ns, "train", 4)
		return inPodGroup("train")
	})
}

func TestGangSchedulerACKLabelsRefusedWholeThenAdmitted(t *testing.T) {
	refusedWholeThenAdmitted(t, func(context.Context, string) func(*corev1.Pod) {
		return withACKLabels("train", 4)
	})
}

// TestGangSchedulerPodGroupConditionNamesQuota: while the tree refuses a
// PodGroup's gang, kube-scheduler's own PodGroupInitiallyScheduled condition
// is False, Unschedulable, and names the quota.
func TestGangSchedulerPodGroupConditionNamesQuota(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	node := "gang-sched-" + ns[len(ns)-5:]
	gangNode(t, ctx, node)
	applyTree(t, ctx, gangTreeManifest(ns, "2", "6", ""))
	invariants(t)
	createGangPodGroup(t, ctx, ns, "train", 4)
	gangMembers(t, ctx, ns, node, "worker", 4, inPodGroup("train"))
	waitFor(t, ctx, "the PodGroup's condition naming the quota", func(ctx context.Context) error {
		pg, err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, k8sscheduling.PodGroupInitiallyScheduled)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != k8sscheduling.PodGroupReasonUnschedulable ||
			!strings.Contains(cond.Message, `exceeded elastic quota "gang-team"`) {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// TestGangSchedulerTwoGangsNeverDeadlock: two gangs of 4 x 2 cpu in a leaf of
// max 8 with room for 16 cpu: one is bound whole, the other not at all, and
// no moment of the watch shows pods of both bound.
func TestGangSchedulerTwoGangsNeverDeadlock(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	node := "gang-sched-" + ns[len(ns)-5:]
	gangNode(t, ctx, node)
	applyTree(t, ctx, gangTreeManifest(ns, "2", "8", ""))
	invariants(t)
	createGangPodGroup(t, ctx, ns, "first", 4)
	createGangPodGroup(t, ctx, ns, "second", 4)

	list, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cluster.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The gangs' pods are created in turns, so that the scheduler meets both.
	for i := range 4 {
		for _, g := range []string{"first", "second"} {
			gangMembers(t, ctx, ns, node, fmt.Sprintf("%s-%d", g, i), 1, inPodGroup(g))
		}
	}
	bound := map[string]map[types.UID]bool{"first": {}, "second": {}}
	both := ""
	for !(len(bound["first"]) == 4 || len(bound["second"]) == 4) {
		select {
		case <-ctx.Done():
			t.Fatalf("no gang bound whole: %d and %d pods bound", len(bound["first"]), len(bound["second"]))
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended")
			}
			p, isPod := e.Object.(*corev1.Pod)
			if !isPod || e.Type == watch.Deleted || p.Spec.SchedulingGroup == nil || p.Spec.NodeName == "" {
				continue
			}
			bound[*p.Spec.SchedulingGroup.PodGroupName][p.UID] = true
			if len(bound["first"]) > 0 && len(bound["second"]) > 0 && both == "" {
				both = fmt.Sprintf("pods of both gangs bound at once: %d and %d", len(bound["first"]), len(bound["second"]))
			}
		}
	}
	if both != "" {
		t.Error(both)
	}
	settle(t, ctx, "one gang bound whole, the other not at all", func(ctx context.Context) error {
		first, err := boundAmong(ctx, ns, []string{"first-0-0", "first-1-0", "first-2-0", "first-3-0"})
		if err != nil {
			return err
		}
		second, err := boundAmong(ctx, ns, []string{"second-0-0", "second-1-0", "second-2-0", "second-3-0"})
		if err != nil {
			return err
		}
		if !(first == 4 && second == 0) && !(first == 0 && second == 4) {
			return fmt.Errorf("bound: first %d, second %d", first, second)
		}
		return nil
	})
}

// TestGangSchedulerReclaimOnlyForTheWholeGang: a gang of 4 x 2 cpu whose
// leaf lends its min to a borrowing sibling. While the gang's 8 cpu exceed
// the leaf's min, reclaim evicts nothing, though one of its pods alone
// would reclaim 2 cpu; once the min is 8, reclaim evicts exactly 4 of the
// borrower's 2-cpu pods and the gang is bound whole.
func TestGangSchedulerReclaimOnlyForTheWholeGang(t *testing.T) {
	ctx := testContext(t)
	ns, borrower := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	node := "gang-sched-" + ns[len(ns)-5:]
	gangNode(t, ctx, node)
	applyTree(t, ctx, gangTreeManifest(ns, "4", "16", borrower))
	invariants(t)
	createDeployment(t, ctx, borrower, "borrow", 8, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	settle(t, ctx, "the sibling borrowing the whole root", wantRunning([]string{borrower}, []int{8}))
	borrowing, err := runningUIDs(ctx, []string{borrower})
	if err != nil {
		t.Fatal(err)
	}

	pods := gangMembers(t, ctx, ns, node, "worker", 4, withACKLabels("train", 4))
	eventsNaming(t, ctx, ns, pods[:1], "gang "+ns+"/train", `exceeded elastic quota "root"`)
	settle(t, ctx, "nothing evicted for a gang past its leaf's min", func(ctx context.Context) error {
		if err := wantRunning([]string{borrower}, []int{8})(ctx); err != nil {
			return err
		}
		if n, err := boundAmong(ctx, ns, pods); err != nil || n != 0 {
			return fmt.Errorf("%d pods of the gang bound (%v)", n, err)
		}
		return nil
	})

	apply(t, ctx, gangTreeManifest(ns, "8", "16", borrower))
	waitFor(t, ctx, "the gang bound whole after reclaim", func(ctx context.Context) error {
		return podsBound(ctx, ns, pods...)
	})
	after, err := runningUIDs(ctx, []string{borrower})
	if err != nil {
		t.Fatal(err)
	}
	still := map[types.UID]bool{}
	for _, uid := range after {
		still[uid] = true
	}
	evicted := 0
	for _, uid := range borrowing {
		if !still[uid] {
			evicted++
		}
	}
	if evicted != 4 {
		t.Errorf("reclaim evicted %d of the borrower's pods, want exactly the gang's 4 x 2 cpu", evicted)
	}
}
