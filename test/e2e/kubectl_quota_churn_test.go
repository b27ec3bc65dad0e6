package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/localcluster"
)

// TestKubectlQuotaExplainDuringChurn: pods come and go in the four leaves of
// the product document's tree (without mins) while `kubectl quota explain` is run on a
// pending pod every second. Each verdict must agree with what the scheduler
// does with that pod within one scheduling retry (its last decision before
// the explanation, or its next one), and no usage explain prints may exceed
// its max: the figures are the live pods plus status' held part, never a mix
// of two moments. make test churns for 30s; QUOTASCALE_EXPLAIN_CHURN sets the
// duration (2m for the figures in the docs).
func TestKubectlQuotaExplainDuringChurn(t *testing.T) {
	ctx := testContext(t)
	duration := 30 * time.Second
	if v := os.Getenv("QUOTASCALE_EXPLAIN_CHURN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("QUOTASCALE_EXPLAIN_CHURN: %v", err)
		}
		duration = d
	}
	var namespaces [4]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	// Room on the nodes for everything: only quota keeps pods pending.
	roomy := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200"), corev1.ResourceMemory: resource.MustParse("800Gi")}
	createNodes(t, ctx, localcluster.NodeSpec{Name: "churn-1", Capacity: roomy}, localcluster.NodeSpec{Name: "churn-2", Capacity: roomy})
	// The product document's tree without mins: no pending pod reclaims, so
	// the churn's own deletions never race a reclaim's evictions, which the
	// invariant checker judges against what the victims' leaves keep.
	tree := string(seedTreeFor(t, namespaces))
	for _, min := range []string{"min: {cpu: 20, memory: 20Gi, nvidia.com/gpu: 2}", "min: {cpu: 10, memory: 10Gi, nvidia.com/gpu: 1}"} {
		tree = strings.ReplaceAll(tree, min, "min: {cpu: 0, memory: 0, nvidia.com/gpu: 0}")
	}
	applyTree(t, ctx, []byte(tree))

	seed := uint64(time.Now().UnixNano())
	t.Logf("churn seed %d, duration %s", seed, duration)
	churnCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		churnPods(churnCtx, t, rand.New(rand.NewPCG(seed, 1)), namespaces[:])
	}()

	var counts churnCounts
	_ = wait.PollUntilContextCancel(churnCtx, time.Second, false, func(ctx context.Context) (bool, error) {
		counts.add(judgeOneExplanation(ctx, t, namespaces[:]))
		return false, nil
	})
	wg.Wait()
	t.Logf("explanations %d: agreed at once %d, after one retry %d, disagreed %d, past a max %d",
		counts.explained, counts.agreed, counts.afterRetry, counts.disagreed, counts.overMax)
	if counts.explained < int(duration/(4*time.Second)) {
		t.Errorf("only %d explanations in %s", counts.explained, duration)
	}
	if counts.disagreed > 0 || counts.overMax > 0 {
		t.Errorf("%d verdicts disagreed with the scheduler beyond one retry, %d printed a usage past its max", counts.disagreed, counts.overMax)
	}
}

// churnCounts are the outcomes of the explanations.
type churnCounts struct {
	explained, agreed, afterRetry, disagreed, overMax int
}

// explanationOutcome is what one explanation showed.
type explanationOutcome struct {
	explained, agreed, afterRetry, disagreed, overMax bool
}

func (c *churnCounts) add(o explanationOutcome) {
	for _, f := range []struct {
		on  bool
		add *int
	}{{o.explained, &c.explained}, {o.agreed, &c.agreed}, {o.afterRetry, &c.afterRetry}, {o.disagreed, &c.disagreed}, {o.overMax, &c.overMax}} {
		if f.on {
			*f.add++
		}
	}
}

// churnPods creates and deletes pods of 5 or 2 cpu in the namespaces until
// ctx ends: four leaves of max 20 under a root of 40 are kept oversubscribed,
// so that pods are always pending somewhere and usage keeps moving.
func churnPods(ctx context.Context, t *testing.T, rng *rand.Rand, namespaces []string) {
	n := 0
	for ctx.Err() == nil {
		ns := namespaces[rng.IntN(len(namespaces))]
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		if len(pods.Items) < 8 || rng.IntN(2) == 0 {
			n++
			cpu := []string{"2", "5"}[rng.IntN(2)]
			if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, newPod(ns, fmt.Sprintf("churn-%d", n), "churn", cpu, nil), metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("creating a churn pod: %v", err)
			}
		} else if victim := pods.Items[rng.IntN(len(pods.Items))]; victim.Spec.NodeName != "" {
			_ = cluster.Client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
		}
	}
}

// judgeOneExplanation explains one pending pod and judges the explanation
// against the scheduler's decisions about that pod: the last one before it,
// or, when that differs, the next one within 15 seconds.
func judgeOneExplanation(ctx context.Context, t *testing.T, namespaces []string) explanationOutcome {
	var pod *corev1.Pod
	for _, ns := range namespaces {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return explanationOutcome{}
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeName == "" && p.DeletionTimestamp == nil && schedulerVerdict(p) != "" {
				pod = p
			}
		}
	}
	if pod == nil {
		return explanationOutcome{}
	}
	before := schedulerVerdict(pod)
	out, err := kubectlQuota(ctx, "explain", "pod", pod.Name, "-n", pod.Namespace, "-o", "json")
	if err != nil {
		if ctx.Err() == nil && !strings.Contains(err.Error(), "not found") {
			t.Errorf("explain %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		return explanationOutcome{}
	}
	var e explanation
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.ElasticQuota == nil {
		t.Errorf("explain %s/%s -o json: %v\n%s", pod.Namespace, pod.Name, err, out)
		return explanationOutcome{}
	}
	o := explanationOutcome{explained: true, overMax: pastMax(t, pod, e)}
	verdict := "admitted"
	if !e.ElasticQuota.Admitted {
		verdict = "refused"
	}
	if verdict == before {
		o.agreed = true
		return o
	}
	// The scheduler's next decision about the pod, within a retry.
	deadline, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(deadline, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cluster.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return true, nil // deleted by the churn: nothing left to compare
		}
		return schedulerVerdict(p) == verdict, nil
	})
	if err == nil {
		o.afterRetry = true
		return o
	}
	o.disagreed = true
	t.Logf("explain %s/%s said %s (%s); the scheduler said %s before and since", pod.Namespace, pod.Name, verdict, e.Verdict, before)
	return o
}

// schedulerVerdict is what the scheduler's last decision about pod says of
// its quota: refused (its PodScheduled condition names an elastic quota),
// admitted (bound, or refused for another reason), or "" before any.
func schedulerVerdict(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return "admitted"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		if strings.Contains(c.Message, "exceeded elastic quota") {
			return "refused"
		}
		return "admitted"
	}
	return ""
}

// pastMax reports, and logs, a usage explain printed past its max.
func pastMax(t *testing.T, pod *corev1.Pod, e explanation) bool {
	over := false
	for _, n := range e.ElasticQuota.Path {
		for _, r := range n.Resources {
			if r.Max == "" || r.Max == "unlimited" || r.Used == "" {
				continue
			}
			used, err1 := resource.ParseQuantity(r.Used)
			limit, err2 := resource.ParseQuantity(r.Max)
			if err1 == nil && err2 == nil && used.Cmp(limit) > 0 {
				t.Logf("explain %s/%s printed %s %s used %s past max %s", pod.Namespace, pod.Name, n.Name, r.Resource, r.Used, r.Max)
				over = true
			}
		}
	}
	return over
}
