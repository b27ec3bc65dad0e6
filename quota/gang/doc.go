// Package gang is the one notion of a gang every Quotascale program shares: a
// set of pods that is useless unless at least MinCount of them run at once.
//
// A pod joins a gang in one of two ways:
//   - the Workload API (scheduling.k8s.io/v1beta1): spec.schedulingGroup.podGroupName
//     names a PodGroup whose scheduling policy is gang{minCount};
//   - Alibaba ACK's pod labels pod-group.scheduling.sigs.k8s.io/name and
//     pod-group.scheduling.sigs.k8s.io/min-available.
//
// The scheduler plugin, the autoscaler and kubectl-quota read membership and
// the gang's request through this package, so that the tree admitting a gang,
// the autoscaler sizing a scale-up for it and the explanation a user reads all
// count the same pods.
package gang
