package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cmd/kubectl-quota/cli"
	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/quota/gang"
)

// The gang scene's cast, in seed 000's tree: namespace1 fills root.a.1 to its
// max, namespace3 borrows root.b.2's idle min, and namespace4 (root.b.2, min
// 10 cpu) brings a gang of 3 x 3 cpu into a full root.
const (
	gangNamespace     = "namespace4"
	gangName          = "trainer"
	gangSize          = 3
	borrowerNamespace = "namespace3"
)

// playGang shows a gang waiting whole, holding no quota, while its leaf's min
// is lent out, and then running whole once reclaim has taken back what the
// whole gang needs, and no more. The gang's pods pass Permit together; the
// scheduler then binds them one by one, so a watcher may catch a binding in
// progress, never a gang left partly bound.
func playGang(ctx context.Context, c *localcluster.Cluster, out io.Writer) error {
	section(out, "Gangs: a gang waits whole while its leaf is lent out, then runs whole after reclaim")
	for _, ns := range seedNamespaces {
		if err := c.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting seed 000's deployments in %s: %w", ns, err)
		}
	}
	if err := waitNoPods(ctx, c); err != nil {
		return err
	}
	for _, w := range []struct{ ns, name string }{{"namespace1", "filler"}, {borrowerNamespace, "borrower"}} {
		if err := createWorkload(ctx, c, w.ns, w.name, 4, "5"); err != nil {
			return err
		}
	}
	if err := waitRunning(ctx, c, "4 pods of 5 cpu in namespace1 and namespace3", "4", "0", "4", "0"); err != nil {
		return err
	}
	if err := waitRootUsed(ctx, c, "40"); err != nil {
		return err
	}
	fmt.Fprintln(out, "namespace1 and namespace3 run 4 pods of 5 cpu each: root.b.1 (namespace3) borrows the 10 cpu of")
	fmt.Fprintln(out, "root.b.2's min that namespace4 does not use, and the root is full at 40 cpu.")

	for i := range gangSize - 1 {
		if err := createGangPod(ctx, c, i); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nA gang of %d pods of 3 cpu in namespace4 (ACK's labels %s=%s, %s=%d), %d of them created:\n",
		gangSize, gang.LabelName, gangName, gang.LabelMinAvailable, gangSize, gangSize-1)
	if err := printExplainVerdict(ctx, c, out); err != nil {
		return err
	}
	return playGangReclaim(ctx, c, out)
}

// playGangReclaim creates the gang's last pod and watches the gang and the
// borrower until the gang is bound, printing each change.
func playGangReclaim(ctx context.Context, c *localcluster.Cluster, out io.Writer) error {
	if err := createGangPod(ctx, c, gangSize-1); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nIts last pod created; the gang asks 9 cpu at once. Watched until it runs:\n")
	fmt.Fprintf(out, "%-14s %s\n", "gang bound", "namespace3 running")
	last := ""
	partial := false
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		bound, err := countPods(ctx, c, gangNamespace, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		if err != nil {
			return false, err
		}
		running, err := countPods(ctx, c, borrowerNamespace, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if err != nil {
			return false, err
		}
		if line := fmt.Sprintf("%-14s %d", fmt.Sprintf("%d of %d", bound, gangSize), running); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		partial = partial || (bound != 0 && bound != gangSize)
		return bound == gangSize, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for gang %s/%s to be bound: %w", gangNamespace, gangName, err)
	}
	if partial {
		fmt.Fprintln(out, "(A count between 0 and 3 is the binding in progress: the 3 pods passed Permit together, and the scheduler binds them one by one.)")
	}
	fmt.Fprintln(out, "Reclaim took back from namespace3 what the whole gang needed, then all 3 pods were bound together.")
	return printExplainVerdict(ctx, c, out)
}

// printExplainVerdict prints what `kubectl quota explain` answers first on
// the gang's first pod, once the tree's status counts what runs.
func printExplainVerdict(ctx context.Context, c *localcluster.Cluster, out io.Writer) error {
	var stdout, stderr bytes.Buffer
	cmd := cli.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	args := []string{"explain", "pod/" + gangName + "-0", "-n", gangNamespace, "-o", "json", "--kubeconfig", c.KubeconfigPath}
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("kubectl quota %s: %w (%s)", strings.Join(args[:4], " "), err, stderr.String())
	}
	var e struct {
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
		return fmt.Errorf("reading kubectl quota explain's answer: %w", err)
	}
	fmt.Fprintf(out, "$ kubectl quota explain pod/%s-0 -n %s\nVerdict: %s\n", gangName, gangNamespace, e.Verdict)
	return nil
}

func createWorkload(ctx context.Context, c *localcluster.Cluster, ns, name string, replicas int32, cpu string) error {
	labels := map[string]string{"app": name}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// createGangPod creates pod i of the gang, marked with ACK's labels, the
// tree's own API's way to mark a gang; a Workload API PodGroup is admitted and
// reclaimed for the same way (at PodGroupPostFilter).
func createGangPod(ctx context.Context, c *localcluster.Cluster, i int) error {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gangName, i), Namespace: gangNamespace,
			Labels: map[string]string{gang.LabelName: gangName, gang.LabelMinAvailable: fmt.Sprint(gangSize)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}},
	}
	if _, err := c.Client.CoreV1().Pods(gangNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", gangNamespace, pod.Name, err)
	}
	return nil
}

// waitRunning waits until runningCounts, in seedNamespaces' order, are want.
func waitRunning(ctx context.Context, c *localcluster.Cluster, what string, want ...string) error {
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = runningCounts(ctx, c)
		return err == nil && strings.Join(got, ",") == strings.Join(want, ","), err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (running %v): %w", what, got, err)
	}
	return nil
}

func countPods(ctx context.Context, c *localcluster.Cluster, ns string, match func(*corev1.Pod) bool) (int, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && match(p) {
			n++
		}
	}
	return n, nil
}

// waitNoPods waits until seed 000's pods are gone, pending ones included.
func waitNoPods(ctx context.Context, c *localcluster.Cluster) error {
	left := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = 0
		for _, ns := range seedNamespaces {
			n, err := countPods(ctx, c, ns, func(*corev1.Pod) bool { return true })
			if err != nil {
				return false, err
			}
			left += n
		}
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for seed 000's pods to go (%d left): %w", left, err)
	}
	return nil
}

// waitRootUsed waits until the tree's status counts cpu used at the root, so
// that what kubectl-quota reads from it is current.
func waitRootUsed(ctx context.Context, c *localcluster.Cluster, cpu string) error {
	want := resource.MustParse(cpu)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := c.Dynamic.Resource(schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")).
			Namespace(schedulingv1beta1.EnforcedNamespace).Get(ctx, "elasticquotatree", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tree := &schedulingv1beta1.ElasticQuotaTree{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tree); err != nil {
			return false, err
		}
		for _, q := range tree.Status.Quotas {
			if used, ok := q.Used[corev1.ResourceCPU]; ok && q.Parent == "" && used.Cmp(want) == 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the tree's status to count %s cpu used: %w", cpu, err)
	}
	return nil
}
