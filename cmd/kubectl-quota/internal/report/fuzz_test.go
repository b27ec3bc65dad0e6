package report

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	workloadv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// fuzzSnapshot is what a fuzz input decodes into: everything kubectl-quota
// reads from a cluster, as arbitrary (possibly invalid, contradictory or
// half-written) objects. The plugin reads objects anyone with write access
// may have broken, so none of them may crash it.
type fuzzSnapshot struct {
	Trees       []schedulingv1beta1.ElasticQuotaTree `json:"trees"`
	Pods        []corev1.Pod                         `json:"pods"`
	Nodes       []corev1.Node                        `json:"nodes"`
	NodesListed bool                                 `json:"nodesListed"`
	Quotas      []autoscalingv1beta1.CapacityQuota   `json:"quotas"`
	Autoscaler  *AutoscalerStatus                    `json:"autoscaler"`
	Events      []corev1.Event                       `json:"events"`
	Notes       []string                             `json:"notes"`
	Top         int                                  `json:"top"`
	// PodGroup is the Workload API PodGroup pods may name; every pod is a
	// candidate member of the explained pod's gang.
	PodGroup *workloadv1beta1.PodGroup `json:"podGroup"`
}

var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{5,}`)

// fuzzSeed is seed 000's tree with status written from its pods and then an
// invalid generation whose shape only status still carries, seed 001's quota
// with registered nodes and an autoscaler status, and a pending pod with events.
func fuzzSeed(f *testing.F) []byte {
	f.Helper()
	var tree schedulingv1beta1.ElasticQuotaTree
	var quota autoscalingv1beta1.CapacityQuota
	for path, into := range map[string]any{"testdata/seed-tree.yaml": &tree, "testdata/seed-quota.yaml": &quota} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			f.Fatal(err)
		}
	}
	tree.Generation = 1
	tree.CreationTimestamp = ago(time.Hour)
	running := replicaPods("namespace1", "train", 3, "5", "node-a", time.Hour)
	built, err := elastic.Build(&tree)
	if err != nil {
		f.Fatal(err)
	}
	live, _ := chargePods(built, running, nil)
	tree.Status.ObservedGeneration = 1
	tree.Status.Conditions = []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue, Reason: "Enforced", Message: "generation 1 is in force"}}
	tree.Status.Quotas = live.Status()
	// The tree in force got an invalid generation 2; its status still
	// describes generation 1. A copy outside kube-system governs nothing.
	invalid := tree.DeepCopy()
	invalid.Generation = 2
	invalid.Spec.Root.Children[0].Min = list("cpu", "50")
	elsewhere := tree.DeepCopy()
	elsewhere.Namespace = "team"
	pending := seedWorkloadPod()
	snap := fuzzSnapshot{
		Trees:       []schedulingv1beta1.ElasticQuotaTree{*invalid, *elsewhere},
		Nodes:       nil,
		NodesListed: true,
		Quotas:      []autoscalingv1beta1.CapacityQuota{quota},
		Autoscaler:  autoscalerWith(NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 5, Registered: 4, Backoff: "OUT_OF_RESOURCES"}),
		Events:      []corev1.Event{*event(pending, "NotTriggerScaleUp", "cluster-autoscaler", `pod didn't trigger scale-up: 1 exceeded quota`, time.Minute)},
		Top:         2,
	}
	for _, n := range seedNodes(4) {
		snap.Nodes = append(snap.Nodes, *n)
	}
	for _, p := range append(running, pending) {
		snap.Pods = append(snap.Pods, *p)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// FuzzReports builds every report from arbitrary snapshots and prints it both
// ways kubectl-quota does (table and JSON). No input may panic, fail to print,
// or explain a pod without a verdict.
func FuzzReports(f *testing.F) {
	f.Add(fuzzSeed(f))
	f.Add([]byte(`{"trees":[{"metadata":{"name":"t","namespace":"kube-system"},"spec":{"root":{"name":"r","children":[{"name":"l","namespaces":["ns"],"max":{"cpu":"1"}}]}},` +
		`"status":{"quotas":[{"name":"r"},{"name":"l","parent":"r","used":{"cpu":"2"}},{"name":"x","parent":"x"}]}}],` +
		`"pods":[{"metadata":{"name":"p","namespace":"ns","ownerReferences":[{"kind":"ReplicaSet","name":"d-1","controller":true}]},"spec":{"nodeName":"n","containers":[{"resources":{"requests":{"cpu":"3"}}}]}}]}`))
	f.Add([]byte(`{"quotas":[{"metadata":{"name":"q"},"spec":{"selector":{"matchExpressions":[{"key":"k","operator":"Near"}]},"limits":{"resources":{"cpu":"1.5"}}},"status":{"used":{"resources":{"cpu":"9"}}}}],` +
		`"nodes":[{"metadata":{"name":"n","labels":{"quotascale.io/node-group":"g"}},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},"status":{"capacity":{"cpu":"-1"}}}],` +
		`"autoscaler":{"NodeGroups":[{"Name":"g","MinSize":3,"MaxSize":1,"Target":-2,"Registered":9}]},"pods":[{"metadata":{"name":"p"},"spec":{"nodeSelector":{"a":"b"}}}],"top":-1}`))
	f.Add([]byte(`{"trees":[{"metadata":{"name":"t","namespace":"kube-system"},"spec":{"root":{"name":"","children":[{"name":""}]}}}],"pods":[{}],"events":[{"involvedObject":{"kind":"Pod"}}]}`))
	f.Add([]byte(`{"trees":[{"metadata":{"name":"t","namespace":"kube-system"},"spec":{"root":{"name":"r","max":{"cpu":"4"},"children":[{"name":"l","namespaces":["ns"],"max":{"cpu":"4"}}]}}}],` +
		`"podGroup":{"metadata":{"name":"g","namespace":"ns"},"spec":{"schedulingPolicy":{"gang":{"minCount":3}}}},` +
		`"pods":[{"metadata":{"name":"a","namespace":"ns"},"spec":{"schedulingGroup":{"podGroupName":"g"},"nodeName":"n","containers":[{"resources":{"requests":{"cpu":"2"}}}]}},` +
		`{"metadata":{"name":"b","namespace":"ns"},"spec":{"schedulingGroup":{"podGroupName":"g"},"containers":[{"resources":{"requests":{"cpu":"2"}}}]}},` +
		`{"metadata":{"name":"c","namespace":"ns","labels":{"pod-group.scheduling.sigs.k8s.io/name":"j","pod-group.scheduling.sigs.k8s.io/min-available":"2147483647"}},"spec":{"containers":[{"resources":{"requests":{"cpu":"1e3"}}}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if hugeExponent.Match(data) {
			// apimachinery's ParseQuantity takes seconds on exponents such as
			// 1e-99999999 inside the decoder; that cost is not this package's.
			return
		}
		var in fuzzSnapshot
		if yaml.Unmarshal(data, &in) != nil {
			return
		}
		s := Snapshot{Now: now, NodesListed: in.NodesListed, Autoscaler: in.Autoscaler, Notes: in.Notes, PodGroup: in.PodGroup}
		for i := range in.Trees {
			s.Trees = append(s.Trees, &in.Trees[i])
		}
		for i := range in.Pods {
			s.Pods = append(s.Pods, &in.Pods[i])
		}
		s.GangPods = s.Pods
		for i := range in.Nodes {
			s.Nodes = append(s.Nodes, &in.Nodes[i])
		}
		for i := range in.Quotas {
			s.Quotas = append(s.Quotas, &in.Quotas[i])
		}
		for i := range in.Events {
			s.Events = append(s.Events, &in.Events[i])
		}
		var out bytes.Buffer
		capacityReport := Capacity(s)
		if err := PrintCapacity(&out, capacityReport); err != nil {
			t.Fatalf("PrintCapacity: %v", err)
		}
		treeReport := Tree(s)
		if err := PrintTree(&out, treeReport); err != nil {
			t.Fatalf("PrintTree: %v", err)
		}
		reports := []any{capacityReport, treeReport}
		// Explain the first few pods (bound or not) and one pending pod of
		// its own; explaining all of them would make a large input quadratic.
		explained := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns"}}}
		for i := range in.Pods {
			if i == 4 {
				break
			}
			explained = append(explained, &in.Pods[i])
		}
		for _, pod := range explained {
			e := Explain(s, pod, in.Top)
			if e.Verdict == "" {
				t.Fatalf("pod %s explained without a verdict", e.Pod)
			}
			if err := PrintExplain(&out, e, now); err != nil {
				t.Fatalf("PrintExplain: %v", err)
			}
			reports = append(reports, e)
		}
		if pg := in.PodGroup; pg != nil && PodGroupPod(s, pg.Namespace, pg.Name) == nil {
			e := ExplainEmptyPodGroup(s, pg)
			if err := PrintExplain(&out, e, now); err != nil || e.Verdict == "" {
				t.Fatalf("PodGroup %s/%s without pods: verdict %q, PrintExplain: %v", pg.Namespace, pg.Name, e.Verdict, err)
			}
			reports = append(reports, e)
		}
		for _, r := range reports {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("-o json fails on %T: %v", r, err)
			}
		}
	})
}
