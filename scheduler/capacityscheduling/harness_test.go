package capacityscheduling

import (
	"context"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/pkg/typedinformer"
	"github.com/quotascale/quotascale/quota/elastic"
)

// The plugin's unit tests run it inside a real scheduling framework
// (k8s.io/kubernetes/pkg/scheduler/testing/framework) with NodeResourcesFit,
// over fake clientsets, a snapshot of nodes and pods, and a fake clock.

const (
	low  int32 = 10
	high int32 = 1000
)

// world is what a test starts from.
type world struct {
	// tree is YAML for the ElasticQuotaTree in kube-system; empty for none.
	tree    string
	flavors []*kueuev1beta1.ResourceFlavor
	nodes   []*corev1.Node
	// pods are bound when they name a node, pending otherwise.
	pods []*corev1.Pod
	pdbs []*policyv1.PodDisruptionBudget
	// dra are ResourceClaims and DeviceClasses.
	dra []runtime.Object
	// podGroups are Workload API PodGroups; the GenericWorkload gate is on
	// when there are any.
	podGroups []*schedulingapi.PodGroup
}

type harness struct {
	t         testing.TB
	ctx       context.Context
	framework framework.Framework
	plugin    *Plugin
	clock     *testingclock.FakeClock
	client    *clientsetfake.Clientset
	// trees serves the ElasticQuotaTree and ResourceFlavor objects.
	trees *dynamicfake.FakeDynamicClient
	// recorder keeps the events recorded through the framework's handle.
	recorder *events.FakeRecorder

	mu        sync.Mutex
	preempted []string
	// activated are the pods the plugin moved to the active queue.
	activated []string
}

// Activate records what the plugin asks the scheduling queue to activate.
func (h *harness) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range pods {
		h.activated = append(h.activated, key)
	}
}

// activatedPods are the keys of the pods activated so far, sorted.
func (h *harness) activatedPods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]string(nil), h.activated...)
	sort.Strings(out)
	return out
}

// sweepHolds runs the cache's sweep of expired holds.
func (h *harness) sweepHolds() {
	h.t.Helper()
	if _, err := h.plugin.cache.sweepHolds(); err != nil {
		h.t.Fatal(err)
	}
}

func node(name, cpu string) *corev1.Node {
	return st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourcePods: "110"}).Obj()
}

// testPod is a pod of namespace requesting cpu, bound to nodeName unless it is
// empty. Its name is its UID, and pods created later are younger.
func testPod(name, namespace, cpu, nodeName string, priority int32, age time.Duration) *corev1.Pod {
	p := st.MakePod().Name(name).UID(name).Namespace(namespace).Priority(priority).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}).
		CreationTimestamp(metav1.NewTime(epoch.Add(-age))).StartTime(metav1.NewTime(epoch.Add(-age))).Obj()
	if nodeName != "" {
		p.Spec.NodeName = nodeName
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// newHarness runs the plugin in a framework over w. Preemption is synchronous
// (SchedulerAsyncPreemption off) so that a test reads its victims as soon as
// PostFilter returns; the victims are recorded, not deleted.
func newHarness(t testing.TB, w world) *harness {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.SchedulerAsyncPreemption, false)
	// The fake dynamic client does not stream the initial list of a watch.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	var objs []runtime.Object
	var bound []*corev1.Pod
	for _, p := range w.pods {
		objs = append(objs, p)
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
		}
	}
	for _, n := range w.nodes {
		objs = append(objs, n)
	}
	for _, pdb := range w.pdbs {
		objs = append(objs, pdb)
	}
	objs = append(objs, w.dra...)
	if len(w.podGroups) > 0 {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	}
	for _, pg := range w.podGroups {
		objs = append(objs, pg)
	}
	client := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	_ = factory.Policy().V1().PodDisruptionBudgets().Informer()

	var custom []runtime.Object
	if w.tree != "" {
		custom = append(custom, treeObject(t, w.tree))
	}
	for _, f := range w.flavors {
		f = f.DeepCopy()
		f.APIVersion, f.Kind = kueuev1beta1.SchemeGroupVersion.String(), "ResourceFlavor"
		custom = append(custom, f)
	}
	// Stored unstructured under a scheme that knows no typed kinds, as a real
	// API server serves custom resources to a dynamic client: the fake sends its
	// stored object on a watch, and a typed one would not reach the informer.
	for i, obj := range custom {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		custom[i] = &unstructured.Unstructured{Object: u}
	}
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		treesResource: "ElasticQuotaTreeList", flavorsResource: "ResourceFlavorList",
	}, custom...)

	h := &harness{t: t, ctx: ctx, clock: testingclock.NewFakeClock(epoch), client: client, trees: dyn,
		recorder: events.NewFakeRecorder(1000)}
	args, err := decodeArgs(&runtime.Unknown{Raw: []byte(`{"writeStatus": false}`), ContentType: runtime.ContentTypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	factoryFn := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		p, err := newPlugin(ctx, fh, args,
			typedinformer.New[schedulingv1beta1.ElasticQuotaTree](dyn, treesResource, 0),
			typedinformer.New[kueuev1beta1.ResourceFlavor](dyn, flavorsResource, 0), h.clock)
		h.plugin = p
		return p, err
	}
	snapshot := internalcache.NewSnapshot(bound, w.nodes)
	f, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, frameworkruntime.FactoryAdapter(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate), noderesources.NewFit), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(Name, factoryFn, "PreEnqueue", "PreFilter", "Filter", "Reserve", "Permit", "PostFilter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "",
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(h.recorder),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithPodActivator(h),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithLogger(logger),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithPodGroupManager(internalcache.New(ctx, nil, false, false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	h.framework = f
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), h.plugin.podsReady) {
		t.Fatal("pod handlers did not sync")
	}
	h.plugin.defaultPreemption.Executor.PreemptPod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *corev1.Pod, _ string) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.preempted = append(h.preempted, victim.Name)
		return false, nil
	}
	return h
}

// treeObject is the ElasticQuotaTree kube-system/elasticquotatree of the YAML
// spec.
func treeObject(t testing.TB, spec string) *schedulingv1beta1.ElasticQuotaTree {
	t.Helper()
	tree := &schedulingv1beta1.ElasticQuotaTree{}
	if err := yaml.UnmarshalStrict([]byte(spec), tree); err != nil {
		t.Fatalf("tree: %v", err)
	}
	tree.APIVersion, tree.Kind = schedulingv1beta1.SchemeGroupVersion.String(), "ElasticQuotaTree"
	tree.Namespace, tree.Name, tree.UID, tree.Generation = schedulingv1beta1.EnforcedNamespace, "elasticquotatree", "tree-uid", 1
	return tree
}

// waitForTree waits until the tree in force (nil for none) satisfies cond.
func (h *harness) waitForTree(what string, cond func(*elastic.Tree) bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		return cond(h.plugin.cache.tree), nil
	}); err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// events drains the events recorded so far.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// victims are the pods preempted so far, sorted.
func (h *harness) victims() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]string(nil), h.preempted...)
	sort.Strings(out)
	return out
}

// preFilter runs every PreFilter plugin, as a scheduling cycle starts.
func (h *harness) preFilter(pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	state := framework.NewCycleState()
	_, status, _ := h.framework.RunPreFilterPlugins(h.ctx, state, pod)
	return state, status
}

// unschedulableEverywhere is the filter result of a pod no node has room for.
func (h *harness) unschedulableEverywhere(nodes []*corev1.Node) *framework.NodeToStatus {
	m := framework.NewDefaultNodeToStatus()
	for _, n := range nodes {
		m.Set(n.Name, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	}
	return m
}

func cpuList(amount string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(amount)}
}

func flavor(name string, labels map[string]string) *kueuev1beta1.ResourceFlavor {
	f := &kueuev1beta1.ResourceFlavor{Spec: kueuev1beta1.ResourceFlavorSpec{NodeLabels: labels}}
	f.Name = name
	return f
}

func TestMain(m *testing.M) {
	// The scheduling queue and the preemption evaluator record into the
	// scheduler's metrics, which kube-scheduler registers at start.
	schedulermetrics.Register()
	os.Exit(m.Run())
}
