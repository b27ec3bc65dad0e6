package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

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
	tree := applyTree(t, ctx, oneLeafTree(ns, 4))
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
		applyTree(t, ctx, oneLeafTree(ns, max))
	}
	if got := writers.of(localcluster.StandbyUserAgent); got > 0 {
		t.Errorf("the standby scheduler wrote tree status %d times; only the leader may", got)
	}
	if writers.total() == 0 {
		t.Error("no status write was seen")
	}
}

// oneLeafTree is the enforced tree of max cpu, with one leaf for namespace.
func oneLeafTree(namespace string, max int) []byte {
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
    - {name: team, namespaces: [%s], max: {cpu: %d}}
`, max, max, namespace, max))
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

// TestSchedulerBinaryWritesTreeStatusOnlyWhileLeading runs the real scheduler
// program with leader election on, while another identity holds its lease:
// the program builds its plugins and syncs, but it is a standby and writes no
// tree status, tick after tick. Once the lease is let go, it leads and writes.
func TestSchedulerBinaryWritesTreeStatusOnlyWhileLeading(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	tree := applyTree(t, ctx, oneLeafTree(ns, 4))
	// Only the program may write status from here on.
	cluster.StopScheduler()
	t.Cleanup(func() {
		if err := cluster.StartScheduler(context.Background(), localcluster.SchedulerOptions{}); err != nil {
			t.Errorf("restarting the scheduler: %v", err)
		}
	})
	lease := fmt.Sprintf("e2e-scheduler-%d", time.Now().UnixNano()%100000)
	now := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: lease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}
	if _, err := cluster.Client.CoordinationV1().Leases("kube-system").Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writers := watchStatusWriters(t, ctx, tree.Namespace, tree.Name)

	program := startProcess(t, exec.Command(buildBinary(t, "./scheduler", "kube-scheduler"),
		"--config="+schedulerBinaryConfig(t, lease), "--secure-port=0", "--v=2", "--vmodule=status=5"))
	// The status writer's own words, one line per tick.
	skipped := func() int {
		return strings.Count(program.out.String(), `"Skipping ElasticQuotaTree status"`)
	}
	bumped := applyTreeUnwritten(t, ctx, oneLeafTree(ns, 6))
	// A tick once the new generation is surely seen: two lines after the
	// update (the first may have been under way).
	from := skipped()
	if err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(context.Context) (bool, error) {
		if n := writers.of("kube-scheduler"); n > 0 {
			return false, fmt.Errorf("the standby program wrote tree status %d times while another identity held the lease", n)
		}
		return skipped() >= from+2, nil
	}); err != nil {
		t.Fatalf("the standby program's status writer: %v", err)
	}
	if !strings.Contains(program.out.String(), `reason="this scheduler replica does not lead"`) {
		t.Fatal("the program skipped tree status for another reason than not leading")
	}

	if err := cluster.Client.CoordinationV1().Leases("kube-system").Delete(ctx, lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the program leading writes the tree's status", func(ctx context.Context) error {
		got, err := getTree(ctx, tree.Namespace, tree.Name)
		if err != nil {
			return err
		}
		if got.Status.ObservedGeneration != bumped {
			return fmt.Errorf("status observes generation %d, want %d", got.Status.ObservedGeneration, bumped)
		}
		if writers.of("kube-scheduler") == 0 {
			return errors.New("not written by the program")
		}
		return nil
	})
}

// applyTreeUnwritten applies a tree without waiting for its status, and
// returns its generation.
func applyTreeUnwritten(t *testing.T, ctx context.Context, manifest []byte) int64 {
	t.Helper()
	return apply(t, ctx, manifest)[0].GetGeneration()
}

// schedulerBinaryConfig writes the program's KubeSchedulerConfiguration: the
// quota profile under a scheduler name no pod uses, and leader election on
// lease in kube-system.
func schedulerBinaryConfig(t *testing.T, lease string) string {
	t.Helper()
	profile := localcluster.QuotaProfile()
	profile.SchedulerName = ptr.To("e2e-binary-scheduler")
	cfg := configv1.KubeSchedulerConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: configv1.SchemeGroupVersion.String(), Kind: "KubeSchedulerConfiguration"},
		ClientConnection: componentbaseconfigv1alpha1.ClientConnectionConfiguration{Kubeconfig: cluster.KubeconfigPath},
		LeaderElection: componentbaseconfigv1alpha1.LeaderElectionConfiguration{
			LeaderElect: ptr.To(true), ResourceLock: "leases", ResourceNamespace: "kube-system", ResourceName: lease,
			LeaseDuration: metav1.Duration{Duration: 2 * time.Second}, RenewDeadline: metav1.Duration{Duration: 1500 * time.Millisecond},
			RetryPeriod: metav1.Duration{Duration: 200 * time.Millisecond},
		},
		Profiles: []configv1.KubeSchedulerProfile{profile},
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
