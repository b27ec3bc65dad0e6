package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

const (
	pollInterval = 50 * time.Millisecond
	pollTimeout  = 60 * time.Second
)

// testContext bounds a test on the cluster and starts the invariant checker
// that judges it.
func testContext(t *testing.T) context.Context {
	t.Helper()
	invariants(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func readTestdata(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createNamespace creates a namespace that is deleted, with everything in it, when
// the test ends.
func createNamespace(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	invariants(t)
	if name == "" {
		name = "e2e-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(t.Name()))
		if len(name) > 50 {
			name = name[:50]
		}
		name = strings.TrimRight(name, "-") + "-" + rand.String(5)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cluster.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		// The namespace controller takes a while; pending pods must not linger
		// for the next test's autoscaler to act on. A terminating namespace
		// refuses the controllers' replacements.
		_ = cluster.Client.CoreV1().Pods(name).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	})
	return name
}

// createNodes creates kwok nodes that are deleted when the test ends.
func createNodes(t *testing.T, ctx context.Context, specs ...localcluster.NodeSpec) {
	t.Helper()
	invariants(t)
	for _, spec := range specs {
		if _, err := cluster.CreateNode(ctx, spec); err != nil {
			t.Fatal(err)
		}
		name := spec.Name
		t.Cleanup(func() {
			_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

func apply(t *testing.T, ctx context.Context, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := cluster.Apply(ctx, manifests)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// normalized round-trips an object through JSON the way the API server's
// responses are decoded, so that integers compare as int64 on both sides.
func normalized(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.Decode(unstructured.UnstructuredJSONScheme, raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.(*unstructured.Unstructured).Object
}

// podPhases counts the pods matching selector in namespace by phase.
func podPhases(ctx context.Context, namespace string, selector labels.Selector) (map[corev1.PodPhase]int, error) {
	pods, err := cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	out := map[corev1.PodPhase]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		out[p.Status.Phase]++
	}
	return out, nil
}

// waitFor polls cond until it holds, failing the test with cond's last error.
func waitFor(t *testing.T, ctx context.Context, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		err := cond(ctx)
		if err != nil && (ctx.Err() != nil || strings.Contains(err.Error(), "would exceed context deadline")) {
			// The poll's deadline cut the check short; keep the last real answer.
			return false, nil
		}
		last = err
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
