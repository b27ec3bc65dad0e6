package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/localcluster"
)

const kwokCloudConfig = `
nodeGroups:
- name: e2e-kwok-a
  minSize: 0
  maxSize: 10
  labels: {cloud.google.com/machine-family: n2}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 2s
- name: e2e-kwok-slow
  minSize: 0
  maxSize: 5
  capacity: {cpu: "2", memory: 8Gi}
  provisioningDelay: 1h
`

// kwokCloudEnv is one kwok cloud on the shared cluster: its config and state
// ConfigMaps are the test's own, and its nodes are deleted when the test ends.
type kwokCloudEnv struct {
	t                     *testing.T
	ctx                   context.Context
	configName, stateName string
	opts                  kwok.Options
	provider              *kwok.Provider
	stopCloud             func()
}

func startKwokCloud(t *testing.T, ctx context.Context, config string) *kwokCloudEnv {
	t.Helper()
	e := &kwokCloudEnv{t: t, ctx: ctx, configName: "e2e-kwok-config", stateName: "e2e-kwok-state"}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: e.configName},
		Data:       map[string]string{kwok.DefaultConfigKey: config},
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.opts = kwok.Options{
		Client:         cluster.Client,
		Config:         kwok.NewConfigMapSource(cluster.Client, "kube-system", e.configName, ""),
		StateNamespace: "kube-system",
		StateName:      e.stateName,
		PollInterval:   100 * time.Millisecond,
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if e.stopCloud != nil {
			e.stopCloud()
		}
		// The nodes of this cloud's groups go with it, whatever their names:
		// a node left behind would take the next test's pods.
		groups := map[string]bool{}
		if parsed, err := kwok.ParseConfig([]byte(config)); err == nil {
			for _, g := range parsed.NodeGroups {
				groups[g.Name] = true
			}
		}
		nodes, _ := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel})
		for _, n := range nodes.Items {
			if group := n.Labels[kwok.NodeGroupLabel]; groups[group] || strings.HasPrefix(group, "e2e-kwok-") {
				_ = cluster.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
		for _, name := range []string{e.configName, e.stateName} {
			_ = cluster.Client.CoreV1().ConfigMaps("kube-system").Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	var err error
	if e.stopCloud, err = cluster.StartKwokCloud(ctx, e.opts); err != nil {
		t.Fatal(err)
	}
	e.provider = e.newProvider()
	return e
}

// newProvider is an autoscaler starting (or restarting).
func (e *kwokCloudEnv) newProvider() *kwok.Provider {
	e.t.Helper()
	p, err := kwok.NewProvider(e.ctx, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *kwokCloudEnv) setConfig(config string) {
	e.t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps("kube-system").Get(e.ctx, e.configName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cm.Data[kwok.DefaultConfigKey] = config
	if _, err := cluster.Client.CoreV1().ConfigMaps("kube-system").Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.provider.Refresh(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.provider.LastConfigError(); err != nil {
		e.t.Fatal(err)
	}
}

func cpGroup(t *testing.T, p cloudprovider.CloudProvider, id string) cloudprovider.NodeGroup {
	t.Helper()
	for _, g := range p.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	t.Fatalf("no node group %s", id)
	return nil
}

// instanceStates summarises Nodes() as "id State [ErrorClass ErrorCode]".
func cpInstanceStates(t *testing.T, g cloudprovider.NodeGroup) []string {
	t.Helper()
	list, err := g.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, in := range list {
		s := in.Id + " " + in.Status.State.String()
		if e := in.Status.ErrorInfo; e != nil {
			s += fmt.Sprintf(" class=%d %s", e.ErrorClass, e.ErrorCode)
		}
		out = append(out, s)
	}
	return out
}

func cpWithState(ids []string, state string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id+" "+state)
	}
	return out
}

// readyKwokNodes returns the Ready nodes of a group by provider ID.
func kwokReadyNodes(ctx context.Context, group string) (map[string]corev1.Node, error) {
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel + "=" + group})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out[n.Spec.ProviderID] = n
			}
		}
	}
	return out, nil
}

// TestKwokCloud drives the kwok provider against the cloud backend on the real
// control plane: provisioning after a delay, an autoscaler restart, injected
// failures, cancelling and deleting.
func TestKwokCloud(t *testing.T) {
	ctx := testContext(t)
	if kwok.NodeAnnotation != localcluster.KwokNodeAnnotation {
		t.Fatalf("kwok.NodeAnnotation %q differs from localcluster.KwokNodeAnnotation %q", kwok.NodeAnnotation, localcluster.KwokNodeAnnotation)
	}
	e := startKwokCloud(t, ctx, kwokCloudConfig)
	a := cpGroup(t, e.provider, "e2e-kwok-a")

	requested := time.Now()
	if err := a.IncreaseSize(3); err != nil {
		t.Fatal(err)
	}
	instances, err := a.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range instances {
		ids = append(ids, in.Id)
	}
	if diff := cmp.Diff(cpWithState(ids, "Creating"), cpInstanceStates(t, a)); len(ids) != 3 || diff != "" {
		t.Fatalf("after IncreaseSize(3), want 3 Creating instances (-want +got):\n%s", diff)
	}

	t.Run("a restarted autoscaler sees the instances it asked for", func(t *testing.T) {
		restarted := cpGroup(t, e.newProvider(), "e2e-kwok-a")
		if size, _ := restarted.TargetSize(); size != 3 {
			t.Errorf("target size %d, want 3", size)
		}
		got, err := restarted.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, in := range got {
			gotIDs = append(gotIDs, in.Id)
		}
		if diff := cmp.Diff(ids, gotIDs); diff != "" {
			t.Errorf("instance IDs (-before restart +after):\n%s", diff)
		}
	})

	waitFor(t, ctx, "3 Ready kwok nodes with the instances' provider IDs", func(ctx context.Context) error {
		nodes, err := kwokReadyNodes(ctx, "e2e-kwok-a")
		if err != nil {
			return err
		}
		var got []string
		for id := range nodes {
			got = append(got, id)
		}
		sort.Strings(got)
		if diff := cmp.Diff(ids, got); diff != "" {
			return errorf("ready nodes by provider ID (-want +got):\n%s", diff)
		}
		return nil
	})
	nodes, err := kwokReadyNodes(ctx, "e2e-kwok-a")
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range nodes {
		// A lower bound only: registering late is fine, early is not.
		if earliest := requested.Add(2 * time.Second).Truncate(time.Second); n.CreationTimestamp.Time.Before(earliest) {
			t.Errorf("node of %s registered at %s, before the 2s provisioning delay ended (%s)", id, n.CreationTimestamp, earliest)
		}
		if n.Labels["cloud.google.com/machine-family"] != "n2" || n.Status.Capacity.Cpu().String() != "4" {
			t.Errorf("node %s: labels %v, capacity %v", n.Name, n.Labels, n.Status.Capacity)
		}
	}
	if err := e.provider.Refresh(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cpWithState(ids, "Running"), cpInstanceStates(t, a)); diff != "" {
		t.Errorf("after registration (-want +got):\n%s", diff)
	}

	t.Run("decreasing the target size never removes registered nodes", func(t *testing.T) {
		err := a.DecreaseTargetSize(-1)
		want := "node group e2e-kwok-a: cannot decrease the target size by 1: only 0 of its 3 instances are not registered yet"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
		slow := cpGroup(t, e.provider, "e2e-kwok-slow")
		if err := slow.IncreaseSize(2); err != nil {
			t.Fatal(err)
		}
		if err := slow.DecreaseTargetSize(-1); err != nil {
			t.Fatal(err)
		}
		if size, _ := slow.TargetSize(); size != 1 {
			t.Errorf("slow group target %d after cancelling one of two, want 1", size)
		}
		if err := slow.DecreaseTargetSize(-2); err == nil {
			t.Errorf("cancelling 2 of 1 unregistered instances: want an error")
		}
		if err := slow.DecreaseTargetSize(-1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("injected out-of-resources failures create no nodes", func(t *testing.T) {
		e.setConfig(strings.Replace(kwokCloudConfig, "provisioningDelay: 2s",
			"provisioningDelay: 2s\n  failures: {outOfResources: true, errorCode: ZONE_RESOURCE_POOL_EXHAUSTED, message: no n2 left}", 1))
		if err := a.IncreaseSize(2); err != nil {
			t.Fatal(err)
		}
		var failed []*corev1.Node
		waitFor(t, ctx, "2 failed instances", func(ctx context.Context) error {
			if err := e.provider.Refresh(); err != nil {
				return err
			}
			list, err := a.Nodes()
			if err != nil {
				return err
			}
			failed = failed[:0]
			for _, in := range list {
				if ei := in.Status.ErrorInfo; ei != nil {
					if ei.ErrorClass != cloudprovider.OutOfResourcesErrorClass || ei.ErrorCode != "ZONE_RESOURCE_POOL_EXHAUSTED" || ei.ErrorMessage != "no n2 left" {
						return errorf("unexpected error info %+v", *ei)
					}
					failed = append(failed, &corev1.Node{Spec: corev1.NodeSpec{ProviderID: in.Id}})
				}
			}
			if len(failed) != 2 {
				return errorf("instances %v", cpInstanceStates(t, a))
			}
			return nil
		})
		if nodes, err := kwokReadyNodes(ctx, "e2e-kwok-a"); err != nil || len(nodes) != 3 {
			t.Errorf("nodes of e2e-kwok-a: %d (%v), want the 3 from before", len(nodes), err)
		}
		// The autoscaler gives up on failed instances by deleting them.
		if err := a.DeleteNodes(failed); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "failed instances gone", func(ctx context.Context) error {
			if err := e.provider.Refresh(); err != nil {
				return err
			}
			if got := cpInstanceStates(t, a); !cmp.Equal(cpWithState(ids, "Running"), got) {
				return errorf("instances %v", got)
			}
			return nil
		})

		e.setConfig(strings.Replace(kwokCloudConfig, "provisioningDelay: 2s",
			"provisioningDelay: 2s\n  failures: {increaseSizeError: 'QUOTA_EXCEEDED: cpu quota reached'}", 1))
		err := a.IncreaseSize(1)
		if want := "node group e2e-kwok-a: QUOTA_EXCEEDED: cpu quota reached"; err == nil || err.Error() != want {
			t.Errorf("IncreaseSize error %v, want %q", err, want)
		}
		e.setConfig(kwokCloudConfig)
	})

	t.Run("DeleteNodes removes the node", func(t *testing.T) {
		victim := nodes[ids[0]]
		if err := a.DeleteNodes([]*corev1.Node{&victim}); err != nil {
			t.Fatal(err)
		}
		if size, _ := a.TargetSize(); size != 2 {
			t.Errorf("target size %d right after DeleteNodes, want 2", size)
		}
		waitFor(t, ctx, "the node and its instance gone", func(ctx context.Context) error {
			if _, err := cluster.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
				return errorf("node %s still exists", victim.Name)
			}
			if err := e.provider.Refresh(); err != nil {
				return err
			}
			if got := cpInstanceStates(t, a); !cmp.Equal(cpWithState(ids[1:], "Running"), got) {
				return errorf("instances %v", got)
			}
			return nil
		})
	})
}
