package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// seed000Snapshot is seed 000 after nginx1: four pods running, the fifth pending,
// with its FailedScheduling event, and no autoscaler.
func seed000Snapshot(t *testing.T) (Snapshot, *corev1.Pod) {
	t.Helper()
	running := replicaPods("namespace1", "nginx1", 4, "5", "seed-1", 10*time.Minute)
	pending := replicaPods("namespace1", "nginx1", 5, "5", "", 10*time.Minute)[4]
	return Snapshot{
		Now:   now,
		Trees: treesOf(withStatus(t, seedTree(t), running)),
		Pods:  running,
		Events: eventsOf(event(pending, "FailedScheduling", "default-scheduler",
			`0/2 nodes are available: 2 exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20.`, 9*time.Minute)),
		Notes: []string{"autoscaler status not found (no ConfigMap kube-system/cluster-autoscaler-status): node groups and upcoming nodes are unknown"},
	}, pending
}

// seed001Snapshot is seed 001 once its four nodes registered.
func seed001Snapshot(t *testing.T) (Snapshot, *corev1.Pod) {
	t.Helper()
	pod := seedWorkloadPod()
	return Snapshot{
		Now: now, Nodes: seedNodes(4), NodesListed: true, Quotas: quotasOf(seedQuota(t)),
		Autoscaler: autoscalerWith(NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 4, Registered: 4}),
		Events: eventsOf(
			event(pod, "TriggeredScaleUp", "cluster-autoscaler", "pod triggered scale-up: [{n2-standard-2 0->4 (max: 20)}]", 3*time.Minute),
			event(pod, "NotTriggerScaleUp", "cluster-autoscaler", `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`, time.Minute),
		),
	}, pod
}

func TestPrintExplainSeedElasticQuota(t *testing.T) {
	s, pod := seed000Snapshot(t)
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintExplain(b, Explain(s, pod, DefaultTop), now) }, `
Pod:        namespace1/nginx1-5d8c9-4
Verdict:    Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)
Requests:   cpu=5

ELASTIC QUOTA: tree kube-system/elasticquotatree, figures from pods and status
QUOTA NODE   RESOURCE   USED   REQUEST   MIN   MAX   BORROWED   BINDING
root.a.1     cpu        20     5         10    20    10         *
root.a       cpu        20     5         20    40    0          -
root         cpu        20     5         40    40    0          -
Scheduler message: exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20

WHAT RAISED root.a.1: bound pods by workload, largest first
NAMESPACE    WORKLOAD            PODS   REQUESTS   NEWEST
namespace1   Deployment/nginx1   4      cpu=20     9m57s

NODE GROUPS: autoscaler status not found
none known

EVENTS (newest last)
AGE   TYPE     REASON             FROM                COUNT   MESSAGE
9m    Normal   FailedScheduling   default-scheduler   1       0/2 nodes are available: 2 exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20.

NOTES
- autoscaler status not found (no ConfigMap kube-system/cluster-autoscaler-status): node groups and upcoming nodes are unknown
`)
}

func TestPrintExplainSeedCapacityQuota(t *testing.T) {
	s, pod := seed001Snapshot(t)
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintExplain(b, Explain(s, pod, DefaultTop), now) }, `
Pod:        default/test-capacityquota-workload-5d8c9-0
Verdict:    Pending: no node group may grow: CapacityQuota "test-capacityquota" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)
Requests:   cpu=500m

NODE GROUPS: from ConfigMap kube-system/cluster-autoscaler-status, written 5s ago
NAME            MIN   MAX   TARGET   REGISTERED   UPCOMING   TEMPLATE              CAN HOST   CAN GROW   WHY
n2-standard-2   0     20    4        4            0          n2-standard-2-node0   yes        no         CapacityQuota "test-capacityquota" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)

CAPACITY QUOTAS on the node groups able to host the pod
NAME                 RESOURCE   USED   UPCOMING   LIMIT   HEADROOM   NODE GROUPS     VALID
test-capacityquota   cpu        8      0          8       0          n2-standard-2   True

EVENTS (newest last)
AGE   TYPE     REASON              FROM                 COUNT   MESSAGE
3m    Normal   TriggeredScaleUp    cluster-autoscaler   1       pod triggered scale-up: [{n2-standard-2 0->4 (max: 20)}]
60s   Normal   NotTriggerScaleUp   cluster-autoscaler   1       pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu

NOTES
- no ElasticQuotaTree in kube-system: the pod is not limited by elastic quota
`)
}

func TestPrintTreeSeed(t *testing.T) {
	s, _ := seed000Snapshot(t)
	s.Notes = nil
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintTree(b, Tree(s)) }, `
TREE: kube-system/elasticquotatree (in force, figures from pods and status, generation 1)
CONDITIONS: Active=True (generation 1 is in force), Valid=True
NAME           NAMESPACES   CPU USED/MIN/MAX   MEMORY USED/MIN/MAX   NVIDIA.COM/GPU USED/MIN/MAX   BORROWED
root           -            20/40/40           0/40Gi/40Gi           0/4/4                         -
  root.a       -            20/20/40           0/20Gi/40Gi           0/2/4                         -
    root.a.1   namespace1   20/10/20           0/10Gi/20Gi           0/1/2                         cpu=10
    root.a.2   namespace2   0/10/20            0/10Gi/40Gi           0/1/2                         -
  root.b       -            0/20/40            0/20Gi/40Gi           0/2/4                         -
    root.b.1   namespace3   0/10/20            0/10Gi/20Gi           0/1/2                         -
    root.b.2   namespace4   0/10/20            0/10Gi/20Gi           0/1/2                         -
`)
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintTree(b, Tree(Snapshot{})) }, `
No ElasticQuotaTrees found.

NOTES
- no ElasticQuotaTree in kube-system: no elastic quota is enforced
`)
}

func TestPrintCapacitySeed(t *testing.T) {
	s, _ := seed001Snapshot(t)
	s.Notes = nil
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintCapacity(b, Capacity(s)) }, `
NAME                 RESOURCE   USED   UPCOMING   LIMIT   HEADROOM   NODE GROUPS     VALID   MESSAGE
test-capacityquota   cpu        8      0          8       0          n2-standard-2   True    CapacityQuota is valid
`)
	s.Autoscaler = nil
	assertPrinted(t, func(b *bytes.Buffer) error { return PrintCapacity(b, Capacity(s)) }, `
NAME                 RESOURCE   USED   UPCOMING   LIMIT   HEADROOM   NODE GROUPS   VALID   MESSAGE
test-capacityquota   cpu        8      ?          8       0          -             True    CapacityQuota is valid

NOTES
- upcoming nodes are unknown without the autoscaler's status
`)
}

func assertPrinted(t *testing.T, print func(*bytes.Buffer) error, want string) {
	t.Helper()
	var b bytes.Buffer
	if err := print(&b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimPrefix(want, "\n"), b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestJSONShape pins the documented field names of -o json.
func TestJSONShape(t *testing.T) {
	s, pod := seed001Snapshot(t)
	s.Notes = nil
	// As the cli encodes it: indented, ">" left alone.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(Explain(s, pod, DefaultTop)); err != nil {
		t.Fatal(err)
	}
	want := `{
  "kind": "PodExplanation",
  "apiVersion": "kubectl-quota.quotascale.io/v1alpha1",
  "pod": "default/test-capacityquota-workload-5d8c9-0",
  "phase": "Pending",
  "verdict": "Pending: no node group may grow: CapacityQuota \"test-capacityquota\" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)",
  "requests": {
    "cpu": "500m"
  },
  "capacity": {
    "autoscalerStatus": "ConfigMap kube-system/cluster-autoscaler-status",
    "statusTime": "2026-11-30T11:59:55Z",
    "nodeGroups": [
      {
        "name": "n2-standard-2",
        "minSize": 0,
        "maxSize": 20,
        "target": 4,
        "registered": 4,
        "upcoming": 0,
        "template": "n2-standard-2-node0",
        "canHost": true,
        "canGrow": false,
        "blocked": [
          "CapacityQuota \"test-capacityquota\" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)"
        ],
        "quotas": [
          "test-capacityquota"
        ]
      }
    ],
    "quotas": [
      {
        "name": "test-capacityquota",
        "selector": "cloud.google.com/compute-class=test-capacityquota-class",
        "valid": true,
        "message": "CapacityQuota is valid",
        "usedFrom": "nodes",
        "nodeGroups": [
          "n2-standard-2"
        ],
        "resources": [
          {
            "resource": "cpu",
            "used": "8",
            "upcoming": "0",
            "limit": "8",
            "headroom": "0"
          }
        ]
      }
    ]
  },
  "events": [
    {
      "time": "2026-11-30T11:57:00Z",
      "type": "Normal",
      "reason": "TriggeredScaleUp",
      "from": "cluster-autoscaler",
      "count": 1,
      "message": "pod triggered scale-up: [{n2-standard-2 0->4 (max: 20)}]"
    },
    {
      "time": "2026-11-30T11:59:00Z",
      "type": "Normal",
      "reason": "NotTriggerScaleUp",
      "from": "cluster-autoscaler",
      "count": 1,
      "message": "pod didn't trigger scale-up: 1 exceeded quota: \"CapacityQuota/test-capacityquota\", resources: cpu"
    }
  ],
  "notes": [
    "no ElasticQuotaTree in kube-system: the pod is not limited by elastic quota"
  ]
}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}
