package scaledown

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// TestEvictionRetry: an eviction a budget refuses is retried until
// --max-pod-eviction-time, and counted once, by its result.
func TestEvictionRetry(t *testing.T) {
	for _, tc := range []struct {
		name              string
		refusals          int
		maxTime           time.Duration
		wantErr           bool
		wantAttemptsLeast int
	}{
		{"refused twice, then evicted", 2, time.Minute, false, 3},
		{"always refused", 1 << 30, 20 * time.Millisecond, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			attempts := 0
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				attempts++
				if attempts <= tc.refusals {
					return true, nil, apierrors.NewTooManyRequests("disruption budget", 1)
				}
				return true, nil, nil
			})
			results := map[string]int{}
			a := &Actuator{Client: client, MaxPodEvictionTime: tc.maxTime, EvictionRetryInterval: time.Millisecond,
				Evicted: func(result string, n int) { results[result] += n }}
			err := a.evictAll(context.Background(), []*corev1.Pod{testPod("p", nil, nil)}, time.Second)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if attempts < tc.wantAttemptsLeast {
				t.Errorf("%d attempts, want at least %d", attempts, tc.wantAttemptsLeast)
			}
			want := map[string]int{"succeeded": 1}
			if tc.wantErr {
				want = map[string]int{"failed": 1}
			}
			if len(results) != 1 || results["succeeded"] != want["succeeded"] || results["failed"] != want["failed"] {
				t.Errorf("evictions counted %v, want %v", results, want)
			}
		})
	}
}

// TestCordonWithTaint: --cordon-node-before-terminating cordons the node with
// the ToBeDeleted taint and uncordons it when the taint is rolled back.
func TestCordonWithTaint(t *testing.T) {
	for _, cordon := range []bool{false, true} {
		n := readyNode("n")
		client := fake.NewClientset(n)
		a := &Actuator{Client: client, CordonNode: cordon}
		ctx := context.Background()
		check := func(on bool) {
			t.Helper()
			got, err := client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if nodetemplate.BeingDeleted(got) != on || got.Spec.Unschedulable != (on && cordon) {
				t.Errorf("cordon %v, taint on %v: taints %v unschedulable %v", cordon, on, got.Spec.Taints, got.Spec.Unschedulable)
			}
		}
		if err := a.setTaint(ctx, "n", true); err != nil {
			t.Fatal(err)
		}
		check(true)
		if err := a.setTaint(ctx, "n", false); err != nil {
			t.Fatal(err)
		}
		check(false)
	}
}
