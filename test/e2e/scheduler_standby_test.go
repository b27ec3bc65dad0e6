package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotascale/quotascale/localcluster"
)

// TestStandbySchedulerWritesNoTreeStatus runs a standby scheduler replica (its
// plugins built, its informers running, never chosen by leader election)
// beside the leader. The standby starts first, so it is the first replica
// ready to write; only the leader writes tree status, after every change of the
// tree. The API server names each write's manager in managedFields, and the
// standby's requests carry their own user agent.
func TestStandbySchedulerWritesNoTreeStatus(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	manifest := func(max int) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: %d}
    max: {cpu: %d}
    children:
    - {name: standby, namespaces: [%s], max: {cpu: %d}}
`, max, max, ns, max))
	}
	tree := applyTree(t, ctx, manifest(4))
	writers := watchStatusWriters(t, ctx, tree.Namespace, tree.Name)

	// The leader restarts after the standby is up.
	cluster.StopScheduler()
	stop, err := cluster.StartStandbyScheduler(ctx, localcluster.SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	// applyTree waits until each generation's status is written.
	for _, max := range []int{6, 8} {
		applyTree(t, ctx, manifest(max))
	}
	if got := writers.of(localcluster.StandbyUserAgent); got > 0 {
		t.Errorf("the standby scheduler wrote tree status %d times; only the leader may", got)
	}
	if writers.total() == 0 {
		t.Error("no status write was seen")
	}
}

// statusWriters counts the status writes of a tree by the manager that made
// them.
type statusWriters struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *statusWriters) of(manager string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[manager]
}

func (w *statusWriters) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.counts {
		n += c
	}
	return n
}

// watchStatusWriters watches the tree until the test ends and counts every
// status write by the manager whose managedFields entry it touched.
func watchStatusWriters(t *testing.T, ctx context.Context, namespace, name string) *statusWriters {
	t.Helper()
	trees := cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(namespace)
	current, err := trees.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, cancel := context.WithCancel(ctx)
	w, err := trees.Watch(watchCtx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + name,
		ResourceVersion: current.GetResourceVersion(),
	})
	if err != nil {
		cancel()
		t.Fatalf("watching ElasticQuotaTree %s/%s: %v", namespace, name, err)
	}
	writers := &statusWriters{counts: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := lastStatusWrites(current)
		for e := range w.ResultChan() {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok || e.Type != watch.Modified {
				continue
			}
			now := lastStatusWrites(u)
			writers.mu.Lock()
			for manager, at := range now {
				if at != last[manager] {
					writers.counts[manager]++
				}
			}
			writers.mu.Unlock()
			last = now
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return writers
}

// lastStatusWrites is, for each manager of the status subresource, the time
// and fields of its entry in managedFields: a write changes one of them.
func lastStatusWrites(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, f := range u.GetManagedFields() {
		if f.Subresource != "status" {
			continue
		}
		var fields string
		if f.FieldsV1 != nil {
			fields = string(f.FieldsV1.Raw)
		}
		// The manager is the user agent up to its first slash.
		manager, _, _ := strings.Cut(f.Manager, "/")
		out[manager] = f.Time.String() + " " + fields
	}
	return out
}
