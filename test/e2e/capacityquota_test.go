package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/processors/status"
)

// The seed 001 node group: 2 cpu capacity, 1930m allocatable, 8Gi, labelled for
// the test compute class, slow enough to provision that loops run meanwhile.
const seedCapacityQuotaGroup = `
nodeGroups:
- name: e2e-kwok-n2-standard-2
  minSize: 0
  maxSize: 20
  labels:
    cloud.google.com/compute-class: test-capacityquota-class
    cloud.google.com/machine-family: n2
    topology.kubernetes.io/zone: us-central1-f
  capacity: {cpu: "2", memory: 8Gi}
  allocatable: {cpu: 1930m, memory: 8Gi}
  provisioningDelay: 4s
`

// TestCapacityQuotaSeedScenario drives shared/scenarios/capacity-quota as written.
func TestCapacityQuotaSeedScenario(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	visibility := filepath.Join(t.TempDir(), "visibility.log")
	a := startAutoscaler(t, ctx, seedCapacityQuotaGroup, func(o *config.Options) { o.VisibilityLogFile = visibility })
	applyInNamespace(t, ctx, ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, ns, 16)

	want := map[string]int{"e2e-kwok-n2-standard-2": 4}
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("targets after the first loop (-want +got):\n%s", diff)
	}
	// The nodes take 4s to register: these loops see them only as upcoming.
	for i := 0; i < 3; i++ {
		a.loop(t, ctx)
	}
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("loops during provisioning went past the quota (-want +got):\n%s", diff)
	}
	// An autoscaler restarted while the nodes provision sees them too.
	restarted := startAutoscalerOnCloud(t, ctx, a)
	restarted.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("a restarted autoscaler went past the quota (-want +got):\n%s", diff)
	}

	settle(t, ctx, "12 pods running, 4 pending", wantPhases(ns, 12, 4))
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("targets once the nodes registered (-want +got):\n%s", diff)
	}

	const reason = seedQuotaReason
	wantQuotaEventOnPendingPods(t, ctx, ns, 1)
	assertVisibilityNoScaleUp(t, visibility, "e2e-kwok-n2-standard-2", "us-central1-f", reason)
	waitFor(t, ctx, "status.used cpu 8 and valid True", func(ctx context.Context) error {
		q, err := getCapacityQuota(ctx, "test-capacityquota")
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(q.Status.Conditions, autoscalingv1beta1.ValidCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Message != "CapacityQuota is valid" {
			return fmt.Errorf("valid condition %+v", cond)
		}
		if q.Status.Used == nil {
			return fmt.Errorf("no status.used")
		}
		if cpu := q.Status.Used.Resources["cpu"]; cpu.String() != "8" {
			return fmt.Errorf("status.used.resources.cpu = %s", cpu.String())
		}
		return nil
	})
	if got := counterValue(t, a.Autoscaler, "quotascale_capacity_quota_scale_up_blocked_total",
		map[string]string{"quota": "test-capacityquota", "resource": "cpu", "node_group": "e2e-kwok-n2-standard-2"}); got < 1 {
		t.Errorf("blocked scale-up counter = %v, want at least 1", got)
	}
	if got := counterValue(t, a.Autoscaler, "cluster_autoscaler_skipped_scale_events_count",
		map[string]string{"direction": "up", "reason": "CpuResourceLimit"}); got < 1 {
		t.Errorf("skipped scale events (CpuResourceLimit) = %v, want at least 1", got)
	}

	// Lowering the limit only blocks new nodes.
	applyCapacityQuotas(t, ctx, []byte(strings.Replace(string(readTestdata(t, "capacity-quota/quota.yaml")), "cpu: 8", "cpu: 4", 1)))
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("lowering the limit changed the targets (-want +got):\n%s", diff)
	}
	settle(t, ctx, "still 12 running on 4 nodes", wantPhases(ns, 12, 4))
}

// zoneQuota overlaps seed 001's machine-family quota (64 cpu, 128Gi for c2, c3
// and c3d) on the c2 and c3 groups below.
const zoneQuota = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: capacity-quota-zone}
spec:
  selector: {matchLabels: {topology.kubernetes.io/zone: us-central1-b}}
  limits: {resources: {nodes: 3}}
`

// TestCapacityQuotaOverlappingZoneBinds: six 7-cpu pods need six 8-cpu c2 nodes;
// the zone quota's 3 nodes bind before the machine-family quota's 64 cpu (8
// nodes), and the reason names only the zone quota.
func TestCapacityQuotaOverlappingZoneBinds(t *testing.T) {
	ctx := testContext(t)
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/more-quotas.yaml"))
	applyCapacityQuotas(t, ctx, []byte(zoneQuota))
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-c2-b
  minSize: 0
  maxSize: 20
  labels: {cloud.google.com/machine-family: c2, topology.kubernetes.io/zone: us-central1-b}
  capacity: {cpu: "8", memory: 16Gi}
  provisioningDelay: 1h
`, nil)
	ns := createNamespace(t, ctx, "")
	createPods(t, ctx, ns, "c2", 6, "7", nil)
	waitUnschedulable(t, ctx, ns, 6)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-c2-b": 3}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	a.loop(t, ctx)
	wantPodEvent(t, ctx, ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/capacity-quota-zone", resources: nodes`)
}

// TestCapacityQuotaOverlappingFamilyBinds: six 30-cpu pods need six 32-cpu c3
// nodes; the zone allows 3, the machine-family quota's 64 cpu only 2: exactly 2
// are added, and the reason names the machine-family quota's cpu.
func TestCapacityQuotaOverlappingFamilyBinds(t *testing.T) {
	ctx := testContext(t)
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/more-quotas.yaml"))
	applyCapacityQuotas(t, ctx, []byte(zoneQuota))
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-c3-b
  minSize: 0
  maxSize: 20
  labels: {cloud.google.com/machine-family: c3, topology.kubernetes.io/zone: us-central1-b}
  capacity: {cpu: "32", memory: 32Gi}
  provisioningDelay: 1h
`, nil)
	ns := createNamespace(t, ctx, "")
	createPods(t, ctx, ns, "c3", 6, "30", nil)
	waitUnschedulable(t, ctx, ns, 6)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-c3-b": 2}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	a.loop(t, ctx)
	wantPodEvent(t, ctx, ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/capacity-quota-high-perf-machines", resources: cpu`)
}

// TestCapacityQuotaInvalidNotEnforced: a quota selecting on an instance-type label,
// or with a selector that does not parse, is reported invalid and not enforced.
func TestCapacityQuotaInvalidNotEnforced(t *testing.T) {
	ctx := testContext(t)
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: invalid-instance-type}
spec:
  selector: {matchLabels: {node.kubernetes.io/instance-type: n2-standard-2}}
  limits: {resources: {cpu: 1}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: invalid-selector}
spec:
  selector: {matchExpressions: [{key: pool, operator: In}]}
  limits: {resources: {cpu: 1}}
`))
	a := startAutoscaler(t, ctx, fourCPUGroup, nil)
	ns := createNamespace(t, ctx, "")
	createPods(t, ctx, ns, "work", 4, "1", nil)
	waitUnschedulable(t, ctx, ns, 4)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 1}, a.targets(t)); diff != "" {
		t.Fatalf("invalid quotas were enforced (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{
		"invalid-instance-type": `selector must not use label key "node.kubernetes.io/instance-type"`,
		"invalid-selector":      "selector is invalid",
	} {
		waitFor(t, ctx, name+" reported invalid", func(ctx context.Context) error {
			q, err := getCapacityQuota(ctx, name)
			if err != nil {
				return err
			}
			cond := meta.FindStatusCondition(q.Status.Conditions, autoscalingv1beta1.ValidCondition)
			if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, want) {
				return fmt.Errorf("valid condition %+v, want False containing %q", cond, want)
			}
			return nil
		})
	}
}

// startAutoscalerOnCloud starts a second autoscaler on a's kwok cloud: a restart.
func startAutoscalerOnCloud(t *testing.T, ctx context.Context, a *testAutoscaler) *testAutoscaler {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	opts := a.opts
	opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
	restarted, err := app.New(runCtx, opts, cluster.Config, app.NewProcess(opts))
	if err != nil {
		t.Fatal(err)
	}
	return &testAutoscaler{Autoscaler: restarted, cloud: a.cloud, opts: opts}
}

func applyCapacityQuotas(t *testing.T, ctx context.Context, manifest []byte) {
	t.Helper()
	for _, o := range apply(t, ctx, manifest) {
		name := o.GetName()
		t.Cleanup(func() {
			_ = cluster.Dynamic.Resource(capacityQuotas).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

// applyInNamespace applies a manifest written for the default namespace into ns,
// so the test's objects go away with its namespace.
func applyInNamespace(t *testing.T, ctx context.Context, ns string, manifest []byte) {
	t.Helper()
	patched := strings.ReplaceAll(string(manifest), "namespace: default", "namespace: "+ns)
	apply(t, ctx, []byte(patched))
}

func getCapacityQuota(ctx context.Context, name string) (*autoscalingv1beta1.CapacityQuota, error) {
	u, err := cluster.Dynamic.Resource(capacityQuotas).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	q := &autoscalingv1beta1.CapacityQuota{}
	return q, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q)
}

func wantPhases(ns string, running, pending int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[corev1.PodPhase]int{}
		for _, p := range pods.Items {
			got[p.Status.Phase]++
		}
		want := map[corev1.PodPhase]int{}
		for phase, n := range map[corev1.PodPhase]int{corev1.PodRunning: running, corev1.PodPending: pending} {
			if n > 0 {
				want[phase] = n
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("pod phases (-want +got):\n%s", diff)
		}
		return nil
	}
}

func wantPodEvent(t *testing.T, ctx context.Context, ns, message string) {
	t.Helper()
	waitFor(t, ctx, "event "+message, func(ctx context.Context) error { return hasPodEvent(ctx, ns, message) })
}

// hasPodEvent finds a NotTriggerScaleUp event with message on a pod of ns.
func hasPodEvent(ctx context.Context, ns, message string) error {
	msgs, err := podEvents(ctx, ns, "NotTriggerScaleUp")
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if _, msg, _ := strings.Cut(m, ": "); msg == message {
			return nil
		}
	}
	return fmt.Errorf("events %q", msgs)
}

// assertVisibilityNoScaleUp finds a noScaleUp entry skipping group for reason.
func assertVisibilityNoScaleUp(t *testing.T, path, group, zone, reason string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := status.NodeGroupReason{
		NodeGroup: status.NodeGroupRef{Name: group, Zone: zone},
		Reason:    status.Reason{MessageID: "no.scale.up.nodegroup.skipped", Parameters: []string{reason}},
	}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	var lines int
	for scanner.Scan() {
		lines++
		var e status.Entry
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("visibility log line %d is not JSON: %v", lines, err)
		}
		if e.Logger != status.VisibilityLogger {
			t.Fatalf("visibility log line %d has logger %q", lines, e.Logger)
		}
		if e.NoDecisionStatus == nil || e.NoDecisionStatus.NoScaleUp == nil {
			continue
		}
		for _, s := range e.NoDecisionStatus.NoScaleUp.SkippedNodeGroups {
			if cmp.Equal(s, want) {
				return
			}
		}
	}
	t.Fatalf("no noScaleUp entry with %+v among %d lines", want, lines)
}

// counterValue sums a metric's samples whose labels include want.
func counterValue(t *testing.T, a *app.Autoscaler, name string, want map[string]string) float64 {
	t.Helper()
	return gatheredCounter(t, a.Metrics.Registry, name, want)
}

// gatherer is a registry as Prometheus scrapes it.
type gatherer interface {
	Gather() ([]*dto.MetricFamily, error)
}

// gatheredCounter sums the samples of g's counter name whose labels include
// want.
func gatheredCounter(t *testing.T, g gatherer, name string, want map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsInclude(m.GetLabel(), want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelsInclude(have []*dto.LabelPair, want map[string]string) bool {
	found := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
