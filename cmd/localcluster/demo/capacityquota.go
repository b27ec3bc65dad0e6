package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

// playCapacityQuota applies seed 001's workload and shows the autoscaler stopping
// at the quota, with the pod event, a visibility log line and the metric; on
// Cluster API, the MachineDeployment and its Machines too.
func playCapacityQuota(ctx context.Context, env Env, out io.Writer) error {
	c, a, visibilityLog := env.Cluster, env.Autoscaler, env.VisibilityLog
	infrastructure := "the kwok cloud"
	if env.ClusterAPINamespace != "" {
		infrastructure = "Cluster API"
	}
	section(out, "Seed 001 on "+infrastructure+": 16 pods of 500m cpu for test-capacityquota-class, whose CapacityQuota allows 8 cpu of nodes")
	if _, err := c.Apply(ctx, examples.CapacityQuotaWorkload); err != nil {
		return err
	}
	var phases string
	stableSince := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := workloadPhases(ctx, c)
		if err != nil {
			return false, err
		}
		if now != phases {
			phases, stableSince = now, time.Now()
			return false, nil
		}
		// Long enough for loops during provisioning to show they add nothing.
		return strings.Contains(now, "Running") && time.Since(stableSince) >= 8*time.Second, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the autoscaler to settle: %w", err)
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "cloud.google.com/compute-class=test-capacityquota-class"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "nodes added: %d (2 cpu each); pods: %s\n", len(nodes.Items), phases)
	if ns := env.ClusterAPINamespace; ns != "" {
		for _, get := range []struct{ command, path string }{
			{"kubectl get machinedeployments -n " + ns, "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/machinedeployments"},
			{"kubectl get machines -n " + ns, "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/machines"},
		} {
			if err := printGet(ctx, c, out, get.command, get.path); err != nil {
				return err
			}
		}
	}

	section(out, "$ kubectl describe pod (a pending one), its event:")
	events, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
	if err != nil {
		return err
	}
	if len(events.Items) > 0 {
		e := events.Items[len(events.Items)-1]
		fmt.Fprintf(out, "Normal  NotTriggerScaleUp  cluster-autoscaler  %s\n", e.Message)
	}

	section(out, "A noScaleUp line of the visibility log ("+visibilityLog+"):")
	if line, err := firstLineContaining(visibilityLog, `"noScaleUp"`, "test-capacityquota"); err == nil {
		fmt.Fprintln(out, line)
	} else {
		return err
	}

	section(out, "$ curl .../metrics | grep test-capacityquota")
	if err := printMetrics(a, out, "test-capacityquota"); err != nil {
		return err
	}
	return printGet(ctx, c, out, "kubectl get cq", "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas")
}

func workloadPhases(ctx context.Context, c *localcluster.Cluster) (string, error) {
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=test-capacityquota-workload"})
	if err != nil {
		return "", err
	}
	counts := map[corev1.PodPhase]int{}
	for _, p := range pods.Items {
		counts[p.Status.Phase]++
	}
	return fmt.Sprintf("%d Running, %d Pending", counts[corev1.PodRunning], counts[corev1.PodPending]), nil
}

func firstLineContaining(path string, subs ...string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		line := scanner.Text()
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return line, nil
		}
	}
	return "", fmt.Errorf("no line of %s contains %q", path, subs)
}

func printMetrics(a *app.Autoscaler, out io.Writer, quota string) error {
	families, err := a.Metrics.Registry.Gather()
	if err != nil {
		return err
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			match := false
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				match = match || l.GetValue() == quota
			}
			if !match && f.GetName() != "cluster_autoscaler_skipped_scale_events_count" {
				continue
			}
			value := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			lines = append(lines, fmt.Sprintf("%s{%s} %g", f.GetName(), strings.Join(labels, ","), value))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}
