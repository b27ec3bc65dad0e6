// Package capacity enforces CapacityQuotas in the cluster autoscaler: each
// quota caps the summed capacity of the nodes its label selector matches, and
// a scale-up is capped so no matching quota goes past any limit.
//
// Cost model: an autoscaler loop asks about every node group, and a cluster
// has thousands of nodes, so nothing here matches every node against every
// quota per loop. Nodes of one node group share the labels selectors look at,
// so selector results are cached per distinct label set (projected onto the
// label keys some selector references), and usage is kept incrementally as
// nodes and upcoming node groups come and go. AllowedDeltaFor goes further:
// it remembers each node group's answer and computes it again only when a
// change could alter it, so a loop asking about every group costs about what
// changed since the last loop.
//
// Units: cpu is counted in whole cores per node, rounded up (a node with
// 1930m capacity counts as 2 cores), as the upstream autoscaler's resource
// tracker does, because limits are written in whole cores and a node is
// bought whole. Memory is bytes; every other resource, extended ones such as
// nvidia.com/gpu included, is read from node capacity under its own name; the
// resource "nodes" counts one per node. DRA devices count under core
// ResourceQuota's name for their class (resources.DeviceClassResource) and
// under the extended resource name a class serves: this package does not read
// ResourceSlices or evaluate CEL, so callers pass nodes whose capacity holds
// their devices (pkg/devices.WithDevices), and each device dimension is
// limited like cpu, all dimensions or none.
//
// A Set is not safe for concurrent use, not even for concurrent AllowedDelta
// calls: a check projects labels and capacity into scratch buffers the set
// owns and may add a label set to its cache.
package capacity
