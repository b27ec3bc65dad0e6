package kwok

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DevicesAnnotation on a kwok node holds, as JSON, the device pools its
// hardware has ([]DevicePoolConfig). The kwok cloud sets it from the node
// group's config; localcluster's kwok DRA driver reads it and publishes the
// node's ResourceSlices (NodeResourceSlices), as a DRA driver on a real node
// publishes the devices it finds.
const DevicesAnnotation = "kwok.quotascale.io/devices"

// DriverManagedBy is the app.kubernetes.io/managed-by label of the slices the
// kwok DRA driver publishes, by which it finds its own.
const DriverManagedBy = "quotascale-kwok-dra-driver"

// DevicePoolConfig is the devices one DRA driver finds on every node of a
// group: Count alike devices named device-0, device-1, ..., in a pool of the
// node's own (named after the node), published in one ResourceSlice.
type DevicePoolConfig struct {
	// Driver is the DRA driver's name, a DNS subdomain of at most 63
	// characters, such as gpu.example.com. One pool per driver.
	Driver string `json:"driver"`
	// Count is how many devices a node has, 1 to 128 (one ResourceSlice).
	Count int `json:"count"`
	// Attributes are every device's attributes, as in a ResourceSlice:
	// {model: {string: a100}, cores: {int: 64}}.
	Attributes map[resourcev1.QualifiedName]resourcev1.DeviceAttribute `json:"attributes,omitempty"`
	// Capacity is every device's capacity: {memory: 40Gi}.
	Capacity map[resourcev1.QualifiedName]string `json:"capacity,omitempty"`
}

// devicePool is a validated DevicePoolConfig.
type devicePool struct {
	config   DevicePoolConfig
	capacity map[resourcev1.QualifiedName]resource.Quantity
}

// qualifiedNameRegexp is a device attribute or capacity name: a C identifier,
// optionally prefixed by a DNS subdomain and "/".
var qualifiedNameRegexp = regexp.MustCompile(`^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z_][A-Za-z0-9_]*$`)

// maxQualifiedNameLength is the API's limit on a device attribute or
// capacity name's identifier, which the checks below apply to the whole name.
const maxQualifiedNameLength = 64

// compileDevices validates a group's device pools, reporting each problem
// under field.
func compileDevices(field string, pools []DevicePoolConfig, add problemf) []devicePool {
	var out []devicePool
	drivers := map[string]int{}
	for i, p := range pools {
		path := fmt.Sprintf("%s[%d]", field, i)
		ok := true
		bad := func(format string, args ...any) {
			add(path+"."+format, args...)
			ok = false
		}
		switch {
		case p.Driver == "":
			bad("driver is required")
		case len(p.Driver) > resourcev1.DriverNameMaxLength || len(content.IsDNS1123Subdomain(p.Driver)) > 0:
			bad("driver: %q must be a DNS subdomain of at most %d characters", p.Driver, resourcev1.DriverNameMaxLength)
		}
		if j, dup := drivers[p.Driver]; dup && p.Driver != "" {
			bad("driver: %q is also the driver of %s[%d]", p.Driver, field, j)
		}
		drivers[p.Driver] = i
		if p.Count < 1 || p.Count > resourcev1.ResourceSliceMaxDevices {
			bad("count: %d is not between 1 and %d", p.Count, resourcev1.ResourceSliceMaxDevices)
		}
		if n := len(p.Attributes) + len(p.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			bad("attributes and capacity: %d names, more than %d", n, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
		}
		for _, name := range sortedNames(p.Attributes) {
			if !validQualifiedName(name) {
				bad("attributes: %q is not a C identifier, optionally prefixed by a DNS subdomain and '/'", name)
			} else if set := attributeValues(p.Attributes[name]); set != 1 {
				bad("attributes[%s]: %d of bool, int, string and version are set, not exactly one", name, set)
			}
		}
		capacity := map[resourcev1.QualifiedName]resource.Quantity{}
		for _, name := range sortedNames(p.Capacity) {
			q, err := resource.ParseQuantity(p.Capacity[name])
			switch {
			case !validQualifiedName(name):
				bad("capacity: %q is not a C identifier, optionally prefixed by a DNS subdomain and '/'", name)
			case err != nil:
				bad("capacity[%s]: %q is not a quantity", name, p.Capacity[name])
			case q.Sign() < 0:
				bad("capacity[%s]: %q is negative", name, p.Capacity[name])
			default:
				capacity[name] = q
			}
		}
		if ok {
			out = append(out, devicePool{config: p, capacity: capacity})
		}
	}
	return out
}

func validQualifiedName(name resourcev1.QualifiedName) bool {
	return len(name) <= maxQualifiedNameLength && qualifiedNameRegexp.MatchString(string(name))
}

func attributeValues(a resourcev1.DeviceAttribute) int {
	set := 0
	for _, isSet := range []bool{a.BoolValue != nil, a.IntValue != nil, a.StringValue != nil, a.VersionValue != nil} {
		if isSet {
			set++
		}
	}
	return set
}

func sortedNames[V any](m map[resourcev1.QualifiedName]V) []resourcev1.QualifiedName {
	names := make([]resourcev1.QualifiedName, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// devicesAnnotation is the DevicesAnnotation value for pools; empty for none.
func devicesAnnotation(pools []devicePool) string {
	if len(pools) == 0 {
		return ""
	}
	configs := make([]DevicePoolConfig, 0, len(pools))
	for _, p := range pools {
		configs = append(configs, p.config)
	}
	data, err := json.Marshal(configs)
	if err != nil {
		// The pools hold only strings, integers and validated quantities.
		panic(fmt.Sprintf("encoding device pools: %v", err))
	}
	return string(data)
}

// DevicesAnnotationValue validates pools and encodes them as the
// DevicesAnnotation of a node that has them.
func DevicesAnnotationValue(pools []DevicePoolConfig) (string, error) {
	var problems []string
	compiled := compileDevices("devices", pools, func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	})
	if len(problems) > 0 {
		return "", &ConfigError{Problems: problems}
	}
	return devicesAnnotation(compiled), nil
}

// NodeResourceSlices are the ResourceSlices a DRA driver on node publishes for
// the devices its DevicesAnnotation declares: per driver, one slice holding a
// pool of the node's own, named after the node, at generation 1. Each slice is
// owned by the node, so that it goes away with it. None for a node without
// the annotation; an error names the node and what is wrong with it.
func NodeResourceSlices(node *corev1.Node) ([]*resourcev1.ResourceSlice, error) {
	raw, ok := node.Annotations[DevicesAnnotation]
	if !ok {
		return nil, nil
	}
	var configs []DevicePoolConfig
	if err := json.Unmarshal([]byte(raw), &configs); err != nil {
		return nil, fmt.Errorf("node %s: annotation %s: %w", node.Name, DevicesAnnotation, err)
	}
	var problems []string
	pools := compileDevices(DevicesAnnotation, configs, func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	})
	if len(problems) > 0 {
		return nil, fmt.Errorf("node %s: %w", node.Name, &ConfigError{Problems: problems})
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(pools))
	for _, p := range pools {
		out = append(out, p.slice(node))
	}
	return out, nil
}

// slice is the pool's ResourceSlice on node.
func (p devicePool) slice(node *corev1.Node) *resourcev1.ResourceSlice {
	devices := make([]resourcev1.Device, 0, p.config.Count)
	for i := range p.config.Count {
		d := resourcev1.Device{Name: fmt.Sprintf("device-%d", i)}
		if len(p.config.Attributes) > 0 {
			d.Attributes = make(map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, len(p.config.Attributes))
			for name, a := range p.config.Attributes {
				d.Attributes[name] = *a.DeepCopy()
			}
		}
		if len(p.capacity) > 0 {
			d.Capacity = make(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, len(p.capacity))
			for name, q := range p.capacity {
				d.Capacity[name] = resourcev1.DeviceCapacity{Value: q.DeepCopy()}
			}
		}
		devices = append(devices, d)
	}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   SliceName(node.Name, p.config.Driver),
			Labels: map[string]string{managedByLabel: DriverManagedBy},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   p.config.Driver,
			Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node.Name),
			Devices:  devices,
		},
	}
	if node.UID != "" {
		s.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
		}}
	}
	return s
}

// SliceName is the name of the ResourceSlice the kwok driver publishes for
// driver's pool on node: both are DNS subdomains, and so is their join.
func SliceName(node, driver string) string { return node + "-" + driver }
