package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reclaim for a Workload API PodGroup (issue 27): kube-scheduler schedules a
// PodGroup's pods in a pod group cycle, which runs PodGroupPostFilter, not
// PostFilter, so the pod path's reclaim never runs for them.

// reclaimTreeManifest is a root of 16 cpu over the leaf "gang-team", which
// governs ns, and the leaf "gang-other", which governs other, with the given
// mins; both may grow to the whole root.
func reclaimTreeManifest(ns, teamMin, other, otherMin string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: gang-team, namespaces: [%s], min: {cpu: %s}, max: {cpu: 16}}
    - {name: gang-other, namespaces: [%s], min: {cpu: %s}, max: {cpu: 16}}
`, ns, teamMin, other, otherMin))
}

// liveAmong counts the pods of uids that are still bound and not being
// deleted in ns.
func liveAmong(ctx context.Context, ns string, uids []types.UID) (int, error) {
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	wanted := map[types.UID]bool{}
	for _, uid := range uids {
		wanted[uid] = true
	}
	n := 0
	for _, p := range pods.Items {
		if wanted[p.UID] && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// TestGangSchedulerPodGroupReclaim: a PodGroup gang of 4 x 2 cpu whose leaf
// lends quota to a borrowing sibling, with 2 cpu of the root free.
//
//   - The sibling (min 10) runs 14 cpu: even with all 4 cpu it borrows
//     evicted, the root would have 6 cpu for the gang's 8. Reclaim evicts
//     nobody, says so on every pod of the gang, and no pod is bound.
//   - With the sibling's min at 4 and the gang's leaf's at 8, the gang fits
//     once 6 cpu come back: reclaim evicts exactly 3 of the sibling's 2-cpu
//     pods, no more, and the gang is bound whole.
func TestGangSchedulerPodGroupReclaim(t *testing.T) {
	ctx := testContext(t)
	ns, borrower := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	node := "gang-sched-" + ns[len(ns)-5:]
	gangNode(t, ctx, node)
	applyTree(t, ctx, reclaimTreeManifest(ns, "4", borrower, "10"))
	invariants(t)
	createDeployment(t, ctx, borrower, "borrow", 7, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	settle(t, ctx, "the sibling borrowing 4 cpu above its min", wantRunning([]string{borrower}, []int{7}))
	borrowing, err := runningUIDs(ctx, []string{borrower})
	if err != nil {
		t.Fatal(err)
	}

	createGangPodGroup(t, ctx, ns, "train", 4)
	pods := gangMembers(t, ctx, ns, node, "worker", 4, inPodGroup("train"))
	eventsNaming(t, ctx, ns, pods, "gang "+ns+"/train", "reclaim: no quota node above its min can give back enough")
	settle(t, ctx, "nobody evicted for a gang that would not fit even then", func(ctx context.Context) error {
		if n, err := liveAmong(ctx, borrower, borrowing); err != nil || n != len(borrowing) {
			return fmt.Errorf("%d of the sibling's %d pods left (%v)", n, len(borrowing), err)
		}
		if n, err := boundAmong(ctx, ns, pods); err != nil || n != 0 {
			return fmt.Errorf("%d pods of the gang bound (%v)", n, err)
		}
		return nil
	})

	apply(t, ctx, reclaimTreeManifest(ns, "8", borrower, "4"))
	waitFor(t, ctx, "the gang bound whole after reclaim", func(ctx context.Context) error {
		return podsBound(ctx, ns, pods...)
	})
	settle(t, ctx, "exactly 3 of the sibling's pods evicted", func(ctx context.Context) error {
		if n, err := liveAmong(ctx, borrower, borrowing); err != nil || n != len(borrowing)-3 {
			return fmt.Errorf("%d of the sibling's %d pods left, want %d (%v)", n, len(borrowing), len(borrowing)-3, err)
		}
		return podsBound(ctx, ns, pods...)
	})
}
