package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// TestAPIServerOutage takes the API server away from every component, then
// brings it back. The autoscaler keeps looping but scales nothing once its data
// is older than --max-stale-data, and scales up again after the outage; the
// scheduler keeps enforcing the tree it had.
func TestAPIServerOutage(t *testing.T) {
	ctx := testContext(t)
	governed, free := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "outage-1", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 2}
    max: {cpu: 2}
    children:
    - {name: team, namespaces: [%s], min: {cpu: 2}, max: {cpu: 2}}
`, governed)))
	a := startAutoscaler(t, ctx, eightCPUGroup, func(o *config.Options) { o.StaleDataBound = time.Second })
	// The 4-cpu node cannot take a 6-cpu pod: it needs a new node.
	createPods(t, ctx, free, "big", 1, "6", nil)
	waitUnschedulable(t, ctx, free, 1)

	outageStart := time.Now()
	cluster.SetAPIAvailable(false)
	outageEnds := func() { cluster.SetAPIAvailable(true) }
	defer outageEnds()
	skippedBefore := counterValue(t, a.Autoscaler, "quotascale_autoscaler_stale_data_skipped_loops_total", nil)
	waitFor(t, ctx, "loops that scale nothing on stale data", func(ctx context.Context) error {
		_ = a.RunOnce(ctx) // within the bound the loop tries, and fails to reach the cloud's state
		if got := counterValue(t, a.Autoscaler, "quotascale_autoscaler_stale_data_skipped_loops_total", nil); got < skippedBefore+2 {
			return fmt.Errorf("%v loops skipped", got-skippedBefore)
		}
		return nil
	})
	outageEnds()
	t.Logf("outage over after %s", time.Since(outageStart).Round(time.Second))

	if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": 0}, a.targets(t)); diff != "" {
		t.Fatalf("the autoscaler scaled during the outage (-want +got):\n%s", diff)
	}
	a.loopUntil(t, ctx, "a scale-up once the data is fresh again", func(ctx context.Context) error {
		if got := a.targets(t)["e2e-kwok-8cpu"]; got != 1 {
			return fmt.Errorf("target %d", got)
		}
		return nil
	})

	// The scheduler still enforces the tree it had before the outage.
	t.Logf("scale-up %s after the outage began", time.Since(outageStart).Round(time.Second))
	createPods(t, ctx, governed, "within", 1, "2", nil)
	waitFor(t, ctx, "a pod within the tree scheduled after the outage", wantPhases(governed, 1, 0))
	createPods(t, ctx, governed, "over", 1, "1", nil)
	settle(t, ctx, "the tree still enforced after the outage", wantPhases(governed, 1, 1))
	assertPendingPodEvent(t, ctx, governed, `exceeded elastic quota "team": cpu used 2, requested 1, max 2`)
}

// TestAutoscalerBuildWaitsForItsInformers builds the autoscaler with
// credentials that may not read CapacityQuotas, so that their informer cannot
// sync, as when the API server goes away just after a replica takes the
// lease. As upstream's, the build waits for the informers until its context
// ends, and then says that the context ended, which is how the binary tells
// a lease lost while starting from a failure to start.
func TestAutoscalerBuildWaitsForItsInformers(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	cloud := startKwokCloud(t, ctx, eightCPUGroup)
	_, _, extra := upstreamRBAC(t)
	// The kwok provider reads its node groups from a ConfigMap of its own.
	extra = append(slices.Clone(extra), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	kubeconfig := chartServiceAccount(t, ctx, ns, extra, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "capacityquotas")
	}, "kube-system/"+cloud.stateName)
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.CloudProviderName = kwok.ProviderName
	opts.CloudConfig = "configmap:kube-system/" + cloud.configName
	opts.KwokState = "kube-system/" + cloud.stateName
	opts.Namespace = ns
	opts.LeaderElect = false
	opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
	buildCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a, err := app.New(buildCtx, opts, restConfig, app.NewProcess(opts))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("app.New = %v, %v; want an error naming its context's end (context.DeadlineExceeded)", a, err)
	}
	t.Logf("app.New: %v", err)
}
