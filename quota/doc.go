// Package quota is the accounting library every Quotascale program shares.
//
// It is pure on purpose: no API clients, no goroutines, no clocks. The
// scheduler, the autoscaler and the kubectl plugin must reach the same verdict
// from the same objects, and that only holds if the arithmetic lives in one
// place that depends on nothing but its inputs.
//
//   - resources: dense integer vectors over interned resource names, the
//     conversions to and from corev1.ResourceList, pod requests and the
//     device-class resource names.
//   - gang: which gang a pod belongs to (a Workload API PodGroup or ACK's
//     labels), its size and the whole gang's request.
//   - elastic: the ElasticQuotaTree model (validation, usage, admission,
//     status figures and the reclaim planner).
//   - capacity: the CapacityQuota set (validation, node usage including
//     upcoming nodes, and the allowed node delta of a scale-up).
package quota
