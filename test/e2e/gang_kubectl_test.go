package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

const gangTreeTemplate = `apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {cpu: 100, memory: 100Gi}
    min: {cpu: 100, memory: 100Gi}
    children:
    - name: root.gang
      namespaces: [%s]
      max: {cpu: %d, memory: 100Gi}
      min: {cpu: 4, memory: 100Gi}
`

// gangExplanation is the part of `explain -o json` about a gang.
type gangExplanation struct {
	Verdict string `json:"verdict"`
	Pod     string `json:"pod"`
	Gang    *struct {
		Gang     string            `json:"gang"`
		Source   string            `json:"source"`
		MinCount int32             `json:"minCount"`
		Pods     int               `json:"pods"`
		Request  map[string]string `json:"request"`
		StandIns int               `json:"standIns"`
	} `json:"gang"`
	ElasticQuota *struct {
		Admitted    bool `json:"admitted"`
		GangRequest bool `json:"gangRequest"`
	} `json:"elasticQuota"`
}

// TestKubectlQuotaExplainGang: a PodGroup gang of 3 x 2 cpu in a leaf of max 4
// cpu, two of its pods created (kube-scheduler holds them). `kubectl quota
// explain` on the PodGroup and on a pod says the gang is not admitted whole,
// that it asks 6 cpu (one pod not created yet counted), and that root.gang's
// cpu stops it; with max 8 the gang fits and waits for its third pod.
func TestKubectlQuotaExplainGang(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "kubectl-quota-gang", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(gangTreeTemplate, ns, 4)))
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	}
	if _, err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, pg.Name, err)
	}
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("trainer-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(pg.Name)},
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}},
			},
		}
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, pod.Name, err)
		}
	}

	explain := func(args ...string) gangExplanation {
		t.Helper()
		var e gangExplanation
		out := mustKubectlQuota(t, ctx, append([]string{"explain", "-n", ns, "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("decoding %s: %v", out, err)
		}
		if e.Gang == nil || e.ElasticQuota == nil {
			t.Fatalf("explain %v has no gang or elastic quota section:\n%s", args, out)
		}
		return e
	}
	e := explain("podgroup/trainer")
	wantVerdict := fmt.Sprintf(`Pending: gang %s/trainer of 3 pods is not admitted whole, so none of its pods is: refused by ElasticQuotaTree node "root.gang" on cpu (used 0 + request 6 > max 4)`, ns)
	if e.Verdict != wantVerdict || e.Pod != ns+"/trainer-0" {
		t.Errorf("explain podgroup/trainer: pod %s, verdict\n got %s\nwant %s", e.Pod, e.Verdict, wantVerdict)
	}
	if g := e.Gang; g.Source != "PodGroup" || g.MinCount != 3 || g.Pods != 2 || g.Request["cpu"] != "6" || g.StandIns != 1 {
		t.Errorf("gang %+v, want a PodGroup of min count 3 with 2 pods asking cpu 6 with 1 stand-in", *g)
	}
	if e.ElasticQuota.Admitted || !e.ElasticQuota.GangRequest {
		t.Errorf("elastic quota admitted %v, judged the gang's request %v; want refused, the gang's", e.ElasticQuota.Admitted, e.ElasticQuota.GangRequest)
	}
	if byPod := explain("pod", "trainer-1"); byPod.Verdict != wantVerdict {
		t.Errorf("explain pod trainer-1: verdict\n got %s\nwant %s", byPod.Verdict, wantVerdict)
	}
	table := mustKubectlQuota(t, ctx, "explain", "-n", ns, "podgroup", "trainer")
	for _, want := range []string{
		fmt.Sprintf("GANG: %s/trainer (PodGroup), min count 3: 2 pod(s), 0 bound", ns),
		"REQUEST is the whole gang's",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("explain podgroup trainer lacks %q:\n%s", want, table)
		}
	}

	applyTree(t, ctx, []byte(fmt.Sprintf(gangTreeTemplate, ns, 8)))
	waitFor(t, ctx, "explain to see root.gang's max 8", func(ctx context.Context) error {
		out, err := kubectlQuota(ctx, "explain", "-n", ns, "-o", "json", "podgroup/trainer")
		if err != nil {
			return err
		}
		var e gangExplanation
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			return err
		}
		want := fmt.Sprintf("Pending: gang %s/trainer has 2 of its 3 pods; the scheduler places none until all 3 exist", ns)
		if e.Verdict != want || e.ElasticQuota == nil || !e.ElasticQuota.Admitted {
			return fmt.Errorf("verdict %q, want %q and the gang admitted", e.Verdict, want)
		}
		return nil
	})

	if _, err := kubectlQuota(ctx, "explain", "-n", ns, "podgroup/missing"); err == nil || !strings.Contains(err.Error(), "PodGroup "+ns+"/missing not found") {
		t.Errorf("explain podgroup/missing: error %v, want not found", err)
	}
}
