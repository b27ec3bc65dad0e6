package devices

import (
	"cmp"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
)

// poolKey names a pool: pool names are unique per driver only.
type poolKey struct{ driver, pool string }

// CurrentByNode groups the node-local ResourceSlices by node, keeping of each
// pool only the slices of its current generation: a driver that republishes
// a pool raises its generation and the slices of older generations are stale
// until they are deleted, so the scheduler ignores them and so does this.
// Slices for all nodes, a node selector or per-device node selection are not
// any one node's and are left out. Nil slices and slices without a driver are
// skipped. Each node's slices are sorted by name.
func CurrentByNode(list []*resourcev1.ResourceSlice) map[string][]*resourcev1.ResourceSlice {
	current := map[poolKey]int64{}
	for _, s := range list {
		if nodeName(s) == "" {
			continue
		}
		key := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if g, seen := current[key]; !seen || s.Spec.Pool.Generation > g {
			current[key] = s.Spec.Pool.Generation
		}
	}
	out := map[string][]*resourcev1.ResourceSlice{}
	for _, s := range list {
		node := nodeName(s)
		if node == "" || s.Spec.Pool.Generation != current[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		out[node] = append(out[node], s)
	}
	for _, node := range out {
		slices.SortFunc(node, func(a, b *resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// Current keeps of slices, all of one node, the current generation of each
// pool: CurrentByNode for a node's own list, e.g. a template node's.
func Current(list []*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for _, node := range CurrentByNode(list) {
		out = append(out, node...)
	}
	slices.SortFunc(out, func(a, b *resourcev1.ResourceSlice) int {
		return cmp.Or(strings.Compare(nodeName(a), nodeName(b)), strings.Compare(a.Name, b.Name))
	})
	return out
}

// nodeName is the node a slice's devices are local to, "" when they are not
// one node's.
func nodeName(s *resourcev1.ResourceSlice) string {
	if s == nil || s.Spec.Driver == "" || s.Spec.NodeName == nil {
		return ""
	}
	return *s.Spec.NodeName
}

// Devices lists the devices of slices, in slice then device order. Pass one
// node's current slices (CurrentByNode); a device a pool publishes twice (a
// driver bug) is listed once.
func Devices(list []*resourcev1.ResourceSlice) []Device {
	var out []Device
	seen := map[string]bool{}
	for _, s := range list {
		if s == nil {
			continue
		}
		for i := range s.Spec.Devices {
			d := Device{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: &s.Spec.Devices[i]}
			if id := d.ID(); !seen[id] {
				seen[id] = true
				out = append(out, d)
			}
		}
	}
	return out
}
