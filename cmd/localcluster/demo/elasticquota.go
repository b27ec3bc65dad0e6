package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

var seedNamespaces = []string{"namespace1", "namespace2", "namespace3", "namespace4"}

// playElasticQuotaTree applies seed 000's deployments one after another and shows,
// once the scheduler has settled, how many pods run in each namespace and why the
// others wait.
func playElasticQuotaTree(ctx context.Context, c *localcluster.Cluster, out io.Writer) error {
	section(out, "Seed 000: borrow, then reclaim (root max 40 cpu; each leaf min 10, max 20; pods of 5 cpu)")
	for _, ns := range seedNamespaces {
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	workloads, err := examples.SeedWorkloads()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%-26s %s\n", "after applying", "Running pods in namespace1 / namespace2 / namespace3 / namespace4")
	for i, w := range workloads {
		if _, err := c.Apply(ctx, w); err != nil {
			return err
		}
		counts, err := settle(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-26s %s\n", fmt.Sprintf("nginx%d.yaml", i+1), strings.Join(counts, " / "))
	}
	section(out, "Why a pod is pending (its FailedScheduling event):")
	msg, err := latestFailedScheduling(ctx, c, "namespace4")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, msg)
	return nil
}

// settle waits until the running counts have not changed for three seconds: the
// scheduler has placed, refused or reclaimed for every pod.
func settle(ctx context.Context, c *localcluster.Cluster) ([]string, error) {
	var last []string
	stableSince := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		counts, err := runningCounts(ctx, c)
		if err != nil {
			return false, err
		}
		if strings.Join(counts, ",") != strings.Join(last, ",") {
			last, stableSince = counts, time.Now()
			return false, nil
		}
		return time.Since(stableSince) >= 3*time.Second, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the scheduler to settle: %w", err)
	}
	return last, nil
}

func runningCounts(ctx context.Context, c *localcluster.Cluster) ([]string, error) {
	out := make([]string, 0, len(seedNamespaces))
	for _, ns := range seedNamespaces {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		out = append(out, fmt.Sprint(running))
	}
	return out, nil
}

func latestFailedScheduling(ctx context.Context, c *localcluster.Cluster, ns string) (string, error) {
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return "", err
	}
	var latest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if latest == nil || e.LastTimestamp.After(latest.LastTimestamp.Time) || e.EventTime.After(latest.EventTime.Time) {
			latest = e
		}
	}
	if latest == nil {
		return "(none)", nil
	}
	return fmt.Sprintf("%s: %s", latest.InvolvedObject.Name, latest.Message), nil
}
