package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/quota/gang"
)

// TestGangAutoscalerCapacityQuotaPodGroup is issue 27's autoscaler
// acceptance with a Workload API PodGroup (gang policy, minCount 3): a
// CapacityQuota of 8 cpu over 4-cpu machines on Cluster API, and a gang of
// 3 x 3500m, one pod per machine. The quota allows 2 machines, the gang needs
// 3: the MachineDeployment's replicas never move, and the reason names the
// gang and the quota. At 12 cpu the gang gets its 3 machines in one scale-up
// (one replicas change) and all 3 pods are bound.
func TestGangAutoscalerCapacityQuotaPodGroup(t *testing.T) {
	gangUnderCapacityQuota(t, gang.KindPodGroup, func(ctx context.Context, ns string) func(*corev1.Pod) {
		createGangPodGroup(t, ctx, ns, "train", 3)
		return inPodGroup("train")
	})
}

// TestGangAutoscalerCapacityQuota is the same case with ACK's gang labels.
func TestGangAutoscalerCapacityQuota(t *testing.T) {
	gangUnderCapacityQuota(t, gang.KindLabels, func(context.Context, string) func(*corev1.Pod) {
		return withACKLabels("train", 3)
	})
}

// gangUnderCapacityQuota runs the case for a gang "train" of the given kind;
// prepare readies the namespace and says how a pod joins the gang.
func gangUnderCapacityQuota(t *testing.T, kind gang.Kind, prepare func(ctx context.Context, ns string) func(*corev1.Pod)) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	pool := map[string]string{"e2e-gang-pool": e.ns}
	quotaName := "e2e-gang-" + e.ns
	quota := func(cpu string) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: %s}
spec:
  selector: {matchLabels: {e2e-gang-pool: %s}}
  limits: {resources: {cpu: %s}}
`, quotaName, e.ns, cpu))
	}
	applyCapacityQuotas(t, ctx, quota("8"))
	e.createGroup(t, ctx, "big", 0, 10, kwokMachine("4", "16Gi", "", "1s", pool))
	changes := watchReplicaValues(t, ctx, e, "big")
	visibility := filepath.Join(t.TempDir(), "visibility.log")
	// Every loop's event is sent: the first loops, before the group's
	// template is read, tell the pods no group can host them, and upstream's
	// default lets one event per pod and reason through every 5 minutes.
	a := e.startAutoscaler(t, ctx, func(o *config.Options) {
		o.VisibilityLogFile = visibility
		o.RecordDuplicatedEvents = true
	})
	pods := createGangPods(t, ctx, e.ns, "train", 3, "3500m", pool, prepare(ctx, e.ns))
	waitUnschedulable(t, ctx, e.ns, 3)

	// Loops until the pods are told that the quota holds the gang back, the
	// replicas unmoved after every one of them.
	quotaReason := fmt.Sprintf(`exceeded quota: "CapacityQuota/%s", resources: cpu`, quotaName)
	wantEvent := fmt.Sprintf("pod didn't trigger scale-up: 1 %s (gang %s/train: 3 pods scale up together)", quotaReason, e.ns)
	unmoved := func(context.Context) error {
		if got := changes.values(); !slices.Equal(got, []int{0}) {
			return fmt.Errorf("the MachineDeployment's replicas went %v under a quota too small for the gang, want [0] throughout", got)
		}
		return nil
	}
	loopUntil(t, ctx, a, "the gang's pods are told the quota holds it back", unmoved, func(ctx context.Context) error {
		return hasPodEvent(ctx, e.ns, wantEvent)
	})
	if err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	assertVisibilityNoScaleUp(t, visibility, e.groupID("big"), "", quotaReason)
	raw, err := os.ReadFile(visibility)
	if err != nil {
		t.Fatal(err)
	}
	if gangRef := fmt.Sprintf(`"gang":{"kind":%q,"namespace":%q,"name":"train","minCount":3}`, kind, e.ns); !strings.Contains(string(raw), gangRef) {
		t.Errorf("the visibility log names no gang %s:\n%s", gangRef, raw)
	}
	if got := counterValue(t, a, "quotascale_capacity_quota_gang_scale_up_skipped_total",
		map[string]string{"quota": quotaName, "resource": "cpu"}); got < 1 {
		t.Errorf("gang_scale_up_skipped_total for the gang under %s = %v, want at least 1", quotaName, got)
	}
	if err := unmoved(ctx); err != nil {
		t.Fatal(err)
	}

	applyCapacityQuotas(t, ctx, quota("12"))
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		return podsBound(ctx, e.ns, pods...) == nil, nil
	})
	if err != nil {
		t.Fatalf("the gang's 3 pods were not bound: %v (replicas went %v)", err, changes.values())
	}
	if got := changes.values(); !slices.Equal(got, []int{0, 3}) {
		t.Errorf("the MachineDeployment's replicas went %v, want [0 3]: the gang's 3 nodes in one scale-up", got)
	}
}

// createGangPods creates n pods name-i of cpu each, on the nodes selector
// picks, made members of a gang by member, and returns their names.
func createGangPods(t *testing.T, ctx context.Context, ns, name string, n int, cpu string, selector map[string]string, member func(*corev1.Pod)) []string {
	t.Helper()
	var names []string
	for i := 0; i < n; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector:                  selector,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
			},
		}
		member(p)
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, p.Name, err)
		}
		names = append(names, p.Name)
	}
	return names
}

// replicaValues records, from a watch, every value a MachineDeployment's
// spec.replicas took, in order, so that a test sees each change, however
// short-lived.
type replicaValues struct {
	mu   sync.Mutex
	seen []int
}

func watchReplicaValues(t *testing.T, ctx context.Context, e *capiEnv, name string) *replicaValues {
	t.Helper()
	w := &replicaValues{}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.dynamic, 0, e.ns, nil)
	informer := factory.ForResource(capiMachineDeployments).Informer()
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetName() != name {
			return
		}
		r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.seen) == 0 || w.seen[len(w.seen)-1] != int(r) {
			w.seen = append(w.seen, int(r))
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *replicaValues) values() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}
