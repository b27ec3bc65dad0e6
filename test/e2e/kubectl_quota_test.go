package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/quotascale/quotascale/cmd/kubectl-quota/cli"
	"github.com/quotascale/quotascale/localcluster"
)

// kubectlQuota runs `kubectl quota ARGS` in-process against the test cluster and
// returns what it printed.
func kubectlQuota(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := cli.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "--kubeconfig", cluster.KubeconfigPath))
	if err := cmd.ExecuteContext(ctx); err != nil {
		return out.String(), fmt.Errorf("kubectl quota %s: %w (stderr: %s)", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

func mustKubectlQuota(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := kubectlQuota(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pendingPods names the pods of ns no node was assigned to.
func pendingPods(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// tableRow finds the row of a printed table whose first field is first, as fields.
func tableRow(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && fields[0] == first {
			return fields
		}
	}
	return nil
}

// explanation is the part of `explain -o json` the tests read.
type explanation struct {
	Verdict      string `json:"verdict"`
	ElasticQuota *struct {
		Leaf     string `json:"leaf"`
		Admitted bool   `json:"admitted"`
		Message  string `json:"message"`
		Path     []struct {
			Name      string              `json:"name"`
			Resources []explainedResource `json:"resources"`
		} `json:"path"`
		ContributorsOf string `json:"contributorsOf"`
	} `json:"elasticQuota"`
	Capacity *struct {
		NodeGroups []struct {
			Name    string   `json:"name"`
			CanHost bool     `json:"canHost"`
			CanGrow bool     `json:"canGrow"`
			Blocked []string `json:"blocked"`
		} `json:"nodeGroups"`
	} `json:"capacity"`
}

type explainedResource struct {
	Resource string `json:"resource"`
	Used     string `json:"used"`
	Request  string `json:"request"`
	Max      string `json:"max"`
	Binding  bool   `json:"binding"`
}

// TestKubectlQuotaElasticQuotaSeed: seed 000's first step with namespaces of the
// test's own, on one 56-cpu node. The pending pod is explained as refused by
// root.a.1 on cpu, with the numbers, and the tree shows root.a.1 borrowing.
func TestKubectlQuotaElasticQuotaSeed(t *testing.T) {
	ctx := testContext(t)
	var namespaces [4]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	ns := namespaces[0]
	createNodes(t, ctx, localcluster.NodeSpec{Name: "kubectl-quota-56cpu", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("56"), corev1.ResourceMemory: resource.MustParse("224Gi")}})
	applyTree(t, ctx, seedTreeFor(t, namespaces))
	apply(t, ctx, []byte(strings.Replace(string(readTestdata(t, "elastic-quota-tree/nginx1.yaml")), "namespace: namespace1", "namespace: "+ns, 1)))
	settle(t, ctx, "4 running, 1 pending", wantPhases(ns, 4, 1))
	waitFor(t, ctx, "tree status with root.a.1 using 20 cpu", func(ctx context.Context) error {
		tree, err := getTree(ctx, "kube-system", "elasticquotatree")
		if err != nil {
			return err
		}
		for _, q := range tree.Status.Quotas {
			if cpu := q.Used[corev1.ResourceCPU]; q.Name == "root.a.1" && cpu.String() == "20" {
				return nil
			}
		}
		return fmt.Errorf("status.quotas %+v", tree.Status.Quotas)
	})

	pending := pendingPods(t, ctx, ns)
	if len(pending) != 1 {
		t.Fatalf("pending pods %q, want 1", pending)
	}
	for _, name := range pending {
		// The scheduler's event lands shortly after the pod is marked unschedulable.
		var out string
		waitFor(t, ctx, "explain showing the FailedScheduling event of "+name, func(ctx context.Context) error {
			var err error
			if out, err = kubectlQuota(ctx, "explain", "pod", name, "-n", ns); err != nil {
				return err
			}
			if !strings.Contains(out, "FailedScheduling") {
				return fmt.Errorf("no FailedScheduling event in:\n%s", out)
			}
			return nil
		})
		t.Logf("kubectl quota explain pod %s -n %s:\n%s", name, ns, out)
		for _, want := range []string{
			`Verdict:    Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
			`Scheduler message: exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20`,
			"WHAT RAISED root.a.1",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("explain %s lacks %q", name, want)
			}
		}
		if diff := cmp.Diff([]string{"root.a.1", "cpu", "20", "5", "10", "20", "10", "*"}, tableRow(out, "root.a.1")); diff != "" {
			t.Errorf("root.a.1 row (-want +got):\n%s", diff)
		}
		if row := tableRow(out, ns); len(row) < 4 {
			t.Errorf("no contributor row for %s", ns)
		} else if diff := cmp.Diff([]string{ns, "Deployment/nginx1", "4", "cpu=20"}, row[:4]); diff != "" {
			t.Errorf("contributor row (-want +got):\n%s", diff)
		}

		var e explanation
		if err := json.Unmarshal([]byte(mustKubectlQuota(t, ctx, "explain", "pod/"+name, "-n", ns, "-o", "json")), &e); err != nil {
			t.Fatal(err)
		}
		if e.ElasticQuota == nil || e.ElasticQuota.Leaf != "root.a.1" || e.ElasticQuota.Admitted || e.ElasticQuota.ContributorsOf != "root.a.1" {
			t.Fatalf("explain -o json: %+v", e.ElasticQuota)
		}
		binding := e.ElasticQuota.Path[0].Resources
		want := []explainedResource{{Resource: "cpu", Used: "20", Request: "5", Max: "20", Binding: true}}
		if got := slices.DeleteFunc(slices.Clone(binding), func(r explainedResource) bool { return !r.Binding }); !cmp.Equal(want, got) {
			t.Errorf("binding resource of root.a.1 in JSON: %+v", binding)
		}
	}

	running, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range running.Items {
		if p.Spec.NodeName != "" {
			out := mustKubectlQuota(t, ctx, "explain", p.Name, "-n", ns)
			if !strings.Contains(out, "Verdict:    Running on node kubectl-quota-56cpu") {
				t.Errorf("explain of running pod %s:\n%s", p.Name, out)
			}
			break
		}
	}

	tree := mustKubectlQuota(t, ctx, "tree")
	t.Logf("kubectl quota tree:\n%s", tree)
	for first, want := range map[string][]string{
		"root":     {"root", "-", "20/40/40", "0/40Gi/40Gi", "0/4/4", "-"},
		"root.a":   {"root.a", "-", "20/20/40", "0/20Gi/40Gi", "0/2/4", "-"},
		"root.a.1": {"root.a.1", ns, "20/10/20", "0/10Gi/20Gi", "0/1/2", "cpu=10"},
		"root.b.2": {"root.b.2", namespaces[3], "0/10/20", "0/10Gi/20Gi", "0/1/2", "-"},
	} {
		if diff := cmp.Diff(want, tableRow(tree, first)); diff != "" {
			t.Errorf("tree row %s (-want +got):\n%s", first, diff)
		}
	}
	if !strings.Contains(tree, "TREE: kube-system/elasticquotatree (in force, figures from pods and status") ||
		!strings.Contains(tree, "CONDITIONS: Active=True") {
		t.Errorf("tree header:\n%s", tree)
	}
	if out := mustKubectlQuota(t, ctx, "tree", "--all", "-o", "yaml"); !strings.Contains(out, "inForce: true") || !strings.Contains(out, "kind: TreeReport") {
		t.Errorf("tree --all -o yaml:\n%s", out)
	}
}

// kubectlQuotaGroup is seed 001's node group under a name of this test's own.
const kubectlQuotaGroup = `
nodeGroups:
- name: e2e-kq-n2-standard-2
  minSize: 0
  maxSize: 20
  labels:
    cloud.google.com/compute-class: test-capacityquota-class
    cloud.google.com/machine-family: n2
    topology.kubernetes.io/zone: us-central1-f
  capacity: {cpu: "2", memory: 8Gi}
  allocatable: {cpu: 1930m, memory: 8Gi}
  provisioningDelay: 2s
`

// TestKubectlQuotaCapacityQuotaSeed: seed 001 with the autoscaler. Every pending
// pod is explained as stopped by CapacityQuota test-capacityquota on cpu, and
// capacity shows the quota full.
func TestKubectlQuotaCapacityQuotaSeed(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	a := startAutoscaler(t, ctx, kubectlQuotaGroup, nil)
	applyInNamespace(t, ctx, ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, ns, 16)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kq-n2-standard-2": 4}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	settle(t, ctx, "12 pods running, 4 pending", wantPhases(ns, 12, 4))
	// A loop once the nodes registered writes the status ConfigMap kubectl quota
	// reads, and the refusal events.
	a.loop(t, ctx)

	const verdict = `Verdict:    Pending: no node group may grow: CapacityQuota "test-capacityquota" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)`
	pending := pendingPods(t, ctx, ns)
	if len(pending) != 4 {
		t.Fatalf("pending pods %q, want 4", pending)
	}
	for _, name := range pending {
		var out string
		waitFor(t, ctx, "explain showing the NotTriggerScaleUp event of "+name, func(ctx context.Context) error {
			var err error
			if out, err = kubectlQuota(ctx, "explain", "pod", name, "-n", ns); err != nil {
				return err
			}
			if !strings.Contains(out, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`) {
				return fmt.Errorf("no NotTriggerScaleUp event in:\n%s", out)
			}
			return nil
		})
		if !strings.Contains(out, verdict) {
			t.Errorf("explain %s lacks %q:\n%s", name, verdict, out)
		}
		if got := tableRow(out, "e2e-kq-n2-standard-2"); len(got) < 9 || !slices.Equal(got[1:9], []string{"0", "20", "4", "4", "0", got[6], "yes", "no"}) {
			t.Errorf("node group row %q", got)
		}
		if diff := cmp.Diff([]string{"test-capacityquota", "cpu", "8", "0", "8", "0", "e2e-kq-n2-standard-2", "True"}, tableRow(out, "test-capacityquota")); diff != "" {
			t.Errorf("quota row of explain %s (-want +got):\n%s", name, diff)
		}
	}
	t.Logf("kubectl quota explain pod %s -n %s:\n%s", pending[0], ns, mustKubectlQuota(t, ctx, "explain", "pod", pending[0], "-n", ns))

	var e explanation
	if err := json.Unmarshal([]byte(mustKubectlQuota(t, ctx, "explain", "pod", pending[0], "-n", ns, "-o", "json")), &e); err != nil {
		t.Fatal(err)
	}
	if e.Capacity == nil || len(e.Capacity.NodeGroups) != 1 || !e.Capacity.NodeGroups[0].CanHost || e.Capacity.NodeGroups[0].CanGrow ||
		!slices.Contains(e.Capacity.NodeGroups[0].Blocked, `CapacityQuota "test-capacityquota" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)`) {
		t.Errorf("explain -o json capacity: %+v", e.Capacity)
	}

	out := mustKubectlQuota(t, ctx, "capacity")
	t.Logf("kubectl quota capacity:\n%s", out)
	if diff := cmp.Diff([]string{"test-capacityquota", "cpu", "8", "0", "8", "0", "e2e-kq-n2-standard-2", "True", "CapacityQuota", "is", "valid"},
		tableRow(out, "test-capacityquota")); diff != "" {
		t.Errorf("capacity row (-want +got):\n%s", diff)
	}
	if out := mustKubectlQuota(t, ctx, "capacity", "-o", "json"); !strings.Contains(out, `"headroom": "0"`) {
		t.Errorf("capacity -o json:\n%s", out)
	}
}
