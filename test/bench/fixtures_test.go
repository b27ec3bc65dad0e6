package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-base/metrics/legacyregistry"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/localcluster"
)

const (
	// benchLabel marks every object the benchmarks create, with the kind of
	// object as its value, so that lists and deletions touch nothing else.
	benchLabel = "bench.quotascale.io/object"
	nodeValue  = "node"
	podValue   = "pod"
	nsValue    = "namespace"

	treeName = "bench"

	// workers bounds the concurrent API calls of a fixture step. The API server
	// is in this process on two cores; more workers only queue.
	workers = 32
	// setupTimeout bounds any one fixture step; iterationTimeout one measured run.
	setupTimeout     = 3 * time.Minute
	iterationTimeout = 5 * time.Minute
)

// Every pod requests the same small amount, so that 5 pods per node fit with
// room to spare and the node never limits the placement.
var (
	podCPU    = resource.MustParse("10m")
	podMemory = resource.MustParse("16Mi")
)

// size is one point of the scaling curve.
type size struct{ nodes, pods, quotas int }

// sizes are the curve issue 11 asks for: three points, 5 pods per node, one quota
// node per 25 pods.
var sizes = []size{
	{nodes: 100, pods: 500, quotas: 20},
	{nodes: 500, pods: 2500, quotas: 100},
	{nodes: 1000, pods: 5000, quotas: 200},
}

// teams and leaves shape the tree: root -> teams -> leaves, exactly quotas nodes
// (1 + 10 + 189 = 200 at the largest size), depth 3.
func (s size) teams() int  { return max(1, s.quotas/20) }
func (s size) leaves() int { return s.quotas - 1 - s.teams() }

// namespace is the namespace of leaf i; pod j goes to leaf j % leaves.
func namespace(leaf int) string { return fmt.Sprintf("bench-%03d", leaf) }

// run nests the size into benchstat-friendly sub-benchmark names, one key=value
// per level: nodes=1000/pods=5000/quotas=200.
func (s size) run(b *testing.B, fn func(b *testing.B)) {
	b.Run(fmt.Sprintf("nodes=%d", s.nodes), func(b *testing.B) {
		b.Run(fmt.Sprintf("pods=%d", s.pods), func(b *testing.B) {
			b.Run(fmt.Sprintf("quotas=%d", s.quotas), fn)
		})
	})
}

// forEach calls fn for 0..n-1 on a bounded pool of workers and returns the first
// error, after which the remaining calls are skipped.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// transient errors are retried: an API server on two busy cores may time out or
// shed load.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

func selector(value string) string { return benchLabel + "=" + value }

// ensureNodes makes exactly n benchmark nodes exist, creating and deleting
// concurrently, then waits until all n are Ready with one list per poll (kwok
// marks them Ready).
func ensureNodes(ctx context.Context, c *localcluster.Cluster, n int) error {
	nodes := c.Client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector(nodeValue)})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	want := sets.New[string]()
	for i := range n {
		want.Insert(nodeName(i))
	}
	have := sets.New[string]()
	var extra []string
	for _, node := range list.Items {
		have.Insert(node.Name)
		if !want.Has(node.Name) {
			extra = append(extra, node.Name)
		}
	}
	if err := forEach(ctx, len(extra), func(ctx context.Context, i int) error {
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			return nodes.Delete(ctx, extra[i], metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s: %w", extra[i], err)
		}
		return nil
	}); err != nil {
		return err
	}
	missing := sets.List(want.Difference(have))
	if err := forEach(ctx, len(missing), func(ctx context.Context, i int) error {
		spec := localcluster.NodeSpec{
			Name:   missing[i],
			Labels: map[string]string{benchLabel: nodeValue},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("32"),
				corev1.ResourceMemory: resource.MustParse("128Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
		}
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			_, err := nodes.Create(ctx, spec.Node(), metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", missing[i], err)
		}
		return nil
	}); err != nil {
		return err
	}
	var ready, total int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector(nodeValue)})
		if err != nil {
			return false, nil
		}
		ready, total = 0, len(list.Items)
		for i := range list.Items {
			if nodeReady(&list.Items[i]) {
				ready++
			}
		}
		return total == n && ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d nodes to be Ready (%d of %d are): %w", n, ready, total, err)
	}
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("bench-node-%04d", i) }

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ensureNamespaces creates the leaves' namespaces that do not exist yet.
func ensureNamespaces(ctx context.Context, client kubernetes.Interface, n int) error {
	return forEach(ctx, n, func(ctx context.Context, i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i), Labels: map[string]string{benchLabel: nsValue}}}
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
		return nil
	})
}

// podsPerLeaf is how many of s.pods land in each leaf's namespace.
func (s size) podsPerLeaf() []int {
	counts := make([]int, s.leaves())
	for j := range s.pods {
		counts[j%len(counts)]++
	}
	return counts
}

func cpuList(milli, memBytes int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(milli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
	}
}

// quotaTree is root -> teams -> leaves with s.quotas nodes, one namespace per
// leaf. The root shares one core and 1Gi per pod, a hundred times what the pods
// request, and every max is the root's, so nothing is refused. With
// admitFraction < 1 each leaf's cpu max (and min, so that no refused pod is
// entitled to reclaim) admits only that fraction of its pods, rounded down; the
// second result is how many pods the tree admits.
func (s size) quotaTree(admitFraction float64) (*schedulingv1beta1.ElasticQuotaTree, int) {
	rootCPU, rootMem := int64(s.pods)*1000, int64(s.pods)<<30
	total := cpuList(rootCPU, rootMem)
	root := schedulingv1beta1.ElasticQuotaSpec{Name: "root", Min: total, Max: total}
	teams, leaves := s.teams(), s.leaves()
	teamCPU, teamMem := rootCPU/int64(teams), rootMem/int64(teams)
	for t := range teams {
		root.Children = append(root.Children, schedulingv1beta1.ElasticQuotaSpec{
			Name: fmt.Sprintf("root.%d", t), Min: cpuList(teamCPU, teamMem), Max: total,
		})
	}
	leavesPerTeam := make([]int, teams)
	for l := range leaves {
		leavesPerTeam[l%teams]++
	}
	admitted := 0
	for l, count := range s.podsPerLeaf() {
		t := l % teams
		leafMin := cpuList(teamCPU/int64(leavesPerTeam[t]), teamMem/int64(leavesPerTeam[t]))
		leafMax := total
		if admitFraction < 1 {
			allowed := int(float64(count) * admitFraction)
			count = allowed
			limit := cpuList(int64(allowed)*podCPU.MilliValue(), rootMem)
			leafMin[corev1.ResourceCPU], leafMax = limit[corev1.ResourceCPU], limit
		}
		admitted += count
		team := &root.Children[t]
		team.Children = append(team.Children, schedulingv1beta1.ElasticQuotaSpec{
			Name: fmt.Sprintf("root.%d.%d", t, l), Namespaces: []string{namespace(l)}, Min: leafMin, Max: leafMax,
		})
	}
	tree := &schedulingv1beta1.ElasticQuotaTree{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "ElasticQuotaTree"},
		ObjectMeta: metav1.ObjectMeta{Name: treeName, Namespace: schedulingv1beta1.EnforcedNamespace},
		Spec:       schedulingv1beta1.ElasticQuotaTreeSpec{Root: root},
	}
	return tree, admitted
}

var treesResource = schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")

// putTree creates or replaces the benchmark tree's spec. The scheduler is
// stopped; the next one to start validates it and puts it in force.
func putTree(ctx context.Context, c *localcluster.Cluster, tree *schedulingv1beta1.ElasticQuotaTree) error {
	trees := c.Dynamic.Resource(treesResource).Namespace(tree.Namespace)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current, err := trees.Get(ctx, tree.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tree)
			if err != nil {
				return err
			}
			_, err = trees.Create(ctx, &unstructured.Unstructured{Object: raw}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tree.Spec)
		if err != nil {
			return err
		}
		current.Object["spec"] = spec
		_, err = trees.Update(ctx, current, metav1.UpdateOptions{})
		return err
	})
}

// waitRootCPUUsed polls the tree's status, which the plugin's status writer
// refreshes every 2s, until the root's cpu usage is want: proof that the plugin
// was in the loop and charged every bound pod. It returns the size of the tree
// object as JSON, status and managed fields included.
func waitRootCPUUsed(ctx context.Context, c *localcluster.Cluster, want resource.Quantity) (int, error) {
	var last string
	var size int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := c.Dynamic.Resource(treesResource).Namespace(schedulingv1beta1.EnforcedNamespace).Get(ctx, treeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return false, err
		}
		size = len(raw)
		var tree schedulingv1beta1.ElasticQuotaTree
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tree); err != nil {
			return false, err
		}
		for _, q := range tree.Status.Quotas {
			if q.Name == "root" {
				used := q.Used[corev1.ResourceCPU]
				last = used.String()
				return used.Cmp(want) == 0, nil
			}
		}
		last = "no root in status.quotas"
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("tree status: root cpu used %s, want %s: %w", last, want.String(), err)
	}
	return size, nil
}

func benchPod(name, ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{benchLabel: podValue}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "c",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: podCPU, corev1.ResourceMemory: podMemory},
				},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// podGeneration makes every iteration's pod names new. kwok works through its
// backlog by name: reusing the names of pods just deleted lets a late kwok
// action hit the new pod of the same name.
var podGeneration atomic.Int64

// createPods creates s.pods bare pods round-robin over the leaves' namespaces
// and returns the resource version to watch them from.
func createPods(ctx context.Context, client kubernetes.Interface, s size) (string, error) {
	leaves := s.leaves()
	gen := podGeneration.Add(1)
	err := forEach(ctx, s.pods, func(ctx context.Context, j int) error {
		pod := benchPod(fmt.Sprintf("pod-%d-%05d", gen, j), namespace(j%leaves))
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			_, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector(podValue)})
	if err != nil {
		return "", fmt.Errorf("listing pods: %w", err)
	}
	bound := 0
	for i := range list.Items {
		if list.Items[i].Spec.NodeName != "" {
			bound++
		}
	}
	if len(list.Items) != s.pods || bound != 0 {
		return "", fmt.Errorf("before the scheduler starts: %d pods (want %d), %d bound (want 0)", len(list.Items), s.pods, bound)
	}
	return list.ResourceVersion, nil
}

// deletePods deletes every benchmark pod (grace period 0, so kwok need not
// finish them) and waits until they are gone.
func deletePods(ctx context.Context, client kubernetes.Interface, st *steps) error {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector(podValue)})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	grace := int64(0)
	err = forEach(ctx, len(list.Items), func(ctx context.Context, i int) error {
		pod := &list.Items[i]
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			return client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.done("delete pods")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		left, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector(podValue), Limit: 1})
		return err == nil && len(left.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the pods to be gone: %w", err)
	}
	st.done("pods gone")
	return nil
}

// deleteEvents deletes the events in the benchmark namespaces (the scheduler
// records one per pod), so that they do not pile up over a long run. It is
// done once per size rather than per iteration: on a busy machine it takes
// as long as deleting the pods.
func deleteEvents(ctx context.Context, client kubernetes.Interface) error {
	nsList, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: selector(nsValue)})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	return forEach(ctx, len(nsList.Items), func(ctx context.Context, i int) error {
		ns := nsList.Items[i].Name
		err := retry.OnError(retry.DefaultBackoff, transient, func() error {
			return client.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		})
		if err != nil {
			return fmt.Errorf("deleting events in %s: %w", ns, err)
		}
		return nil
	})
}

// settleWatch follows the benchmark pods from a resource version and records
// when want of them have settled: bound to a node, or, when refusals count,
// marked unschedulable by the scheduler.
type settleWatch struct {
	done    chan struct{}
	at      time.Time
	bound   sets.Set[types.UID]
	refused sets.Set[types.UID]
	err     error
	// deciles are when 10%, 20%, ... of want had settled, for a timeline.
	deciles []time.Time
}

func watchSettled(ctx context.Context, client kubernetes.Interface, rv string, want int, countRefused bool) (*settleWatch, error) {
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector(podValue)
			return pods.Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	s := &settleWatch{done: make(chan struct{}), bound: sets.New[types.UID](), refused: sets.New[types.UID]()}
	go func() {
		defer close(s.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					s.err = fmt.Errorf("pod watch closed")
					return
				}
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				switch {
				case pod.Spec.NodeName != "":
					s.bound.Insert(pod.UID)
					s.refused.Delete(pod.UID)
				case countRefused && unschedulable(pod):
					s.refused.Insert(pod.UID)
				}
				settled := s.bound.Len() + s.refused.Len()
				for len(s.deciles) < 10 && settled*10 >= want*(len(s.deciles)+1) {
					s.deciles = append(s.deciles, time.Now())
				}
				if settled >= want {
					s.at = time.Now()
					return
				}
			}
		}
	}()
	return s, nil
}

func unschedulable(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// cpuTime is the CPU time this process (control plane, kwok, scheduler and
// benchmark alike) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// busyCPU is the CPU time every process on the machine has used (user, nice,
// system, irq, softirq: not idle, iowait or steal), from /proc/stat. Minus
// cpuTime over a window it is what other processes took from the benchmark:
// the machine is shared, and the ext-cores metric says how busy it was.
func busyCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// userHZ is the unit of /proc/stat; 100 on every Linux architecture Go supports.
const userHZ = 100

// treeStatusWrites counts the status updates of ElasticQuotaTrees the API
// server of this process has served, from its own metrics.
func treeStatusWrites() int {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return -1
	}
	n := 0
	for _, f := range families {
		if f.GetName() != "apiserver_request_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["resource"] == "elasticquotatrees" && labels["subresource"] == "status" && labels["verb"] == "PUT" {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}

// refusalMessage finds the quota refusal recorded on one unschedulable pod, for
// a failure message.
func refusalMessage(ctx context.Context, client kubernetes.Interface) string {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector(podValue)})
	if err != nil {
		return err.Error()
	}
	for i := range list.Items {
		for _, cond := range list.Items[i].Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return list.Items[i].Namespace + "/" + list.Items[i].Name + ": " + cond.Message
			}
		}
	}
	return "no unschedulable pod"
}

// scheduleAttempts sums the scheduler's scheduling attempts by result, from its
// own metrics in this process.
func scheduleAttempts() map[string]int {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != "scheduler_schedule_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}
