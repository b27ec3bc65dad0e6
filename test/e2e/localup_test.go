package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

const localUpGroups = `nodeGroups:
- name: e2e-localup-a
  minSize: 0
  maxSize: 2
  labels: {e2e-localup: "yes"}
  capacity: {cpu: "2", memory: 8Gi}
`

// TestLocalUpRunsTheBinary: `make local-up ARGS=--autoscaler=false` starts the
// node groups and the kwok cloud without an autoscaler (StartNodeGroups, as
// cmd/localcluster calls it) and prints a command line; a shell runs exactly
// that line, with the binary built from ./cluster-autoscaler as
// bin/cluster-autoscaler, and the binary scales the group up for a pending
// pod. The autoscaler flag passed through local-up reaches the binary.
func TestLocalUpRunsTheBinary(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	dir := t.TempDir()
	groupsFile := filepath.Join(dir, "node groups.yaml") // a space, for the shell quoting
	if err := os.WriteFile(groupsFile, []byte(localUpGroups), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanUpLocalUp(t) })
	groups, err := cluster.StartNodeGroups(ctx, localcluster.NodeGroupsOptions{
		Config: groupsFile, NoAutoscaler: true, ScanInterval: time.Second,
		AutoscalerArgs: []string{"--scale-down-enabled=false", "--namespace=" + ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(groups.Stop)
	if groups.Autoscaler != nil {
		t.Fatal("an autoscaler runs in process with NoAutoscaler")
	}
	var printed bytes.Buffer
	groups.WriteSummary(&printed, groupsFile)
	line := printedCommandLine(t, printed.String(), "bin/cluster-autoscaler ")
	for _, want := range []string{"--cloud-provider=kwok", "--scale-down-enabled=false", "'--cloud-config=" + groupsFile + "'",
		"--kubeconfig=" + cluster.KubeconfigPath} {
		if !strings.Contains(line, want) {
			t.Errorf("the printed command line %q lacks %s", line, want)
		}
	}

	// The repository's bin/, as `make build` leaves it.
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(autoscalerBinary(t), filepath.Join(root, "bin", "cluster-autoscaler")); err != nil {
		t.Fatal(err)
	}
	shell := exec.Command("sh", "-c", "exec "+line)
	shell.Dir = root
	p := startProcess(t, shell)

	pod := newPod(ns, "needs-a-node", "localup", "1500m", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"e2e-localup": "yes"}
	})
	if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the pod running on a node the binary asked for", func(ctx context.Context) error {
		select {
		case <-p.exited:
			t.Fatalf("the autoscaler exited: %v", p.err)
		default:
		}
		got, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s on %q", got.Status.Phase, got.Spec.NodeName)
		}
		node, err := cluster.Client.CoreV1().Nodes().Get(ctx, got.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g := node.Labels[kwok.NodeGroupLabel]; g != "e2e-localup-a" {
			return fmt.Errorf("node %s is of group %q", node.Name, g)
		}
		return nil
	})
	// The user's --namespace reached the binary: its status is there.
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, api.StatusConfigMapName, metav1.GetOptions{}); err != nil {
		t.Errorf("the status ConfigMap in the --namespace passed through local-up: %v", err)
	}
}

// printedCommandLine is the line of the printed text that starts, indented,
// with prefix.
func printedCommandLine(t *testing.T, printed, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(printed, "\n") {
		if strings.HasPrefix(line, "  "+prefix) {
			return strings.TrimPrefix(line, "  ")
		}
	}
	t.Fatalf("no command line starting with %q in:\n%s", prefix, printed)
	return ""
}

// cleanUpLocalUp removes the nodes of the local-up groups and the kwok
// cloud's state, which local-up keeps where the chart does.
func cleanUpLocalUp(t *testing.T) {
	ctx := context.Background()
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel + "=e2e-localup-a"})
	if err != nil {
		t.Error(err)
		return
	}
	for _, n := range nodes.Items {
		_ = cluster.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
	ns, name, _ := strings.Cut(config.Defaults().KwokState, "/")
	_ = cluster.Client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
}
