package kwok

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"sigs.k8s.io/yaml"
)

// Config is what the kwok cloud offers: its node groups. It is read from a YAML
// or JSON document (see ConfigSource); the provider and the cloud backend both
// read it, so a change reaches both without a restart.
type Config struct {
	NodeGroups []NodeGroupConfig `json:"nodeGroups"`
}

// NodeGroupConfig describes one node group as the user writes it. Quantities and
// durations stay strings here so that validation can name the field that does
// not parse instead of failing the whole decode.
type NodeGroupConfig struct {
	// Name is a DNS-1123 label, unique in the config. Node names and provider IDs
	// are derived from it.
	Name    string `json:"name"`
	MinSize int    `json:"minSize"`
	MaxSize int    `json:"maxSize"`
	// Labels are added to every node, on top of the standard ones.
	Labels map[string]string `json:"labels,omitempty"`
	Taints []TaintConfig     `json:"taints,omitempty"`
	// Capacity needs cpu and memory; pods defaults to 110.
	Capacity map[string]string `json:"capacity"`
	// Allocatable defaults to Capacity, resource by resource.
	Allocatable map[string]string `json:"allocatable,omitempty"`
	// ProvisioningDelay is how long an instance takes before its node registers,
	// as a Go duration ("2s", "1m30s"). Empty means at once.
	ProvisioningDelay string `json:"provisioningDelay,omitempty"`
	// Failures injects errors; see FailureConfig.
	Failures *FailureConfig `json:"failures,omitempty"`
	// Devices are the DRA devices on every node of the group, by driver; see
	// DevicePoolConfig.
	Devices []DevicePoolConfig `json:"devices,omitempty"`
}

// TaintConfig is a node taint.
type TaintConfig struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// FailureConfig makes a node group fail the way a real cloud does. Instances
// fail to create when OutOfResources is true or ErrorCode is set; the backend
// then records the error on the instance instead of creating a node.
type FailureConfig struct {
	// OutOfResources classes the failure as OutOfResourcesErrorClass (a stockout
	// or an exhausted cloud quota); otherwise it is OtherErrorClass.
	OutOfResources bool `json:"outOfResources,omitempty"`
	// ErrorCode and Message are reported on failed instances. The code defaults to
	// OUT_OF_RESOURCES or CREATE_FAILED, by class.
	ErrorCode string `json:"errorCode,omitempty"`
	Message   string `json:"message,omitempty"`
	// FailAfter lets instances succeed while the group has fewer than FailAfter
	// running instances: a stockout that starts after a few machines.
	FailAfter *int `json:"failAfter,omitempty"`
	// IncreaseSizeError makes IncreaseSize itself return this error, as when the
	// cloud API refuses the request outright.
	IncreaseSizeError string `json:"increaseSizeError,omitempty"`
}

// Limits of the config.
const (
	// MaxInstances bounds the sum of maxSize over all groups: every instance is a
	// record in the state ConfigMap, which the API server caps at 1 MiB.
	MaxInstances = 4000
	// maxGroupNameLength leaves room for the "-template" suffix of the template
	// node's name (instances get "-" and 5 characters): node names are also
	// kubernetes.io/hostname label values, at most 63 characters.
	maxGroupNameLength = 54
	defaultMaxPods     = "110"
)

// Default error codes of failed instances.
const (
	ErrorCodeOutOfResources = "OUT_OF_RESOURCES"
	ErrorCodeCreateFailed   = "CREATE_FAILED"
)

var errorCodeRegexp = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// ConfigError lists every problem of an invalid config, in config order.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return "invalid kwok cloud config: " + strings.Join(e.Problems, "; ")
}

// ParseConfig decodes a YAML or JSON config strictly (unknown fields are errors)
// and validates it.
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("parsing kwok cloud config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate reports every problem of the config as a *ConfigError, or nil.
func (c *Config) Validate() error {
	_, err := c.compile()
	return err
}

// groupSpec is a validated node group with its values parsed.
type groupSpec struct {
	name        string
	minSize     int
	maxSize     int
	labels      map[string]string
	taints      []corev1.Taint
	capacity    corev1.ResourceList
	allocatable corev1.ResourceList
	delay       time.Duration
	failures    *failureSpec
	devices     []devicePool
	// increaseSizeError is set even when instances do not fail.
	increaseSizeError string
}

type failureSpec struct {
	class     string // "OutOfResources" or "Other"
	code      string
	message   string
	failAfter int // -1: from the first instance
}

// compiled is a validated config, groups by name.
type compiled struct {
	groups map[string]*groupSpec
	names  []string // sorted
}

func (c *Config) compile() (*compiled, error) {
	var problems []string
	out := &compiled{groups: map[string]*groupSpec{}}
	if len(c.NodeGroups) == 0 {
		problems = append(problems, "nodeGroups: at least one node group is required")
	}
	firstIndex := map[string]int{}
	total := 0
	for i := range c.NodeGroups {
		g := &c.NodeGroups[i]
		spec, groupProblems := compileGroup(i, g)
		if g.Name != "" {
			if j, dup := firstIndex[g.Name]; dup {
				groupProblems = append(groupProblems, fmt.Sprintf("%s: name %q is also used by nodeGroups[%d]", groupPath(i, g.Name), g.Name, j))
			} else {
				firstIndex[g.Name] = i
			}
		}
		problems = append(problems, groupProblems...)
		if g.MaxSize > 0 {
			total += g.MaxSize
		}
		if len(groupProblems) == 0 {
			out.groups[spec.name] = spec
			out.names = append(out.names, spec.name)
		}
	}
	if total > MaxInstances {
		problems = append(problems, fmt.Sprintf("nodeGroups: maxSize adds up to %d over all node groups, more than the %d instances the state ConfigMap can hold", total, MaxInstances))
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	sort.Strings(out.names)
	return out, nil
}

func groupPath(i int, name string) string {
	if name == "" || len(content.IsDNS1123Label(name)) > 0 || len(name) > maxGroupNameLength {
		return fmt.Sprintf("nodeGroups[%d]", i)
	}
	return fmt.Sprintf("nodeGroups[%d] (%s)", i, name)
}

func compileGroup(i int, g *NodeGroupConfig) (*groupSpec, []string) {
	p := groupPath(i, g.Name)
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, p+": "+fmt.Sprintf(format, args...))
	}
	checkGroupName(g.Name, add)
	if g.MinSize < 0 {
		add("minSize %d is negative", g.MinSize)
	}
	if g.MaxSize < g.MinSize {
		add("maxSize %d is less than minSize %d", g.MaxSize, g.MinSize)
	}
	spec := &groupSpec{name: g.Name, minSize: g.MinSize, maxSize: g.MaxSize}
	spec.labels = compileLabels(g.Labels, add)
	spec.taints = compileTaints(g.Taints, add)
	spec.capacity, spec.allocatable = compileResources(g, add)
	spec.devices = compileDevices("devices", g.Devices, add)
	if g.ProvisioningDelay != "" {
		d, err := time.ParseDuration(g.ProvisioningDelay)
		switch {
		case err != nil:
			add("provisioningDelay: %q is not a duration such as \"2s\" or \"1m30s\"", g.ProvisioningDelay)
		case d < 0:
			add("provisioningDelay: %q is negative", g.ProvisioningDelay)
		default:
			spec.delay = d
		}
	}
	if f := g.Failures; f != nil {
		spec.increaseSizeError = f.IncreaseSizeError
		spec.failures = compileFailures(g.Name, f, add)
	}
	return spec, problems
}

// problemf reports one problem of the group being compiled.
type problemf func(format string, args ...any)

func checkGroupName(name string, add problemf) {
	switch {
	case name == "":
		add("name is required")
	case len(name) > maxGroupNameLength:
		add("name %q is longer than %d characters", name, maxGroupNameLength)
	case len(content.IsDNS1123Label(name)) > 0:
		add("name %q must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
}

// compileLabels keeps the valid labels a group's nodes may carry.
func compileLabels(labels map[string]string, add problemf) map[string]string {
	out := map[string]string{}
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		switch {
		case len(content.IsLabelKey(k)) > 0:
			add("labels: %q is not a valid label key", k)
		case k == corev1.LabelHostname || k == NodeGroupLabel:
			add("labels: %s is set by the cloud and cannot be configured", k)
		case len(content.IsLabelValue(v)) > 0:
			add("labels[%s]: %q is not a valid label value", k, v)
		default:
			out[k] = v
		}
	}
	return out
}

func compileTaints(taints []TaintConfig, add problemf) []corev1.Taint {
	var out []corev1.Taint
	for j, t := range taints {
		if len(content.IsLabelKey(t.Key)) > 0 {
			add("taints[%d].key: %q is not a valid taint key", j, t.Key)
		}
		if t.Value != "" && len(content.IsLabelValue(t.Value)) > 0 {
			add("taints[%d].value: %q is not a valid taint value", j, t.Value)
		}
		effect := corev1.TaintEffect(t.Effect)
		if effect != corev1.TaintEffectNoSchedule && effect != corev1.TaintEffectPreferNoSchedule && effect != corev1.TaintEffectNoExecute {
			add("taints[%d].effect: %q is not one of NoSchedule, PreferNoSchedule, NoExecute", j, t.Effect)
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: effect})
	}
	return out
}

// compileResources is a group's node capacity, with cpu and memory required
// and pods defaulted, and its allocatable, capacity where not given lower.
func compileResources(g *NodeGroupConfig, add problemf) (capacity, allocatable corev1.ResourceList) {
	capacity, resourceProblems := parseResources("capacity", g.Capacity)
	for _, r := range resourceProblems {
		add("%s", r)
	}
	for _, required := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := g.Capacity[string(required)]; !ok {
			add("capacity.%s is required", required)
		}
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		if _, given := g.Capacity[string(corev1.ResourcePods)]; !given {
			capacity[corev1.ResourcePods] = resource.MustParse(defaultMaxPods)
		}
	}
	given, resourceProblems := parseResources("allocatable", g.Allocatable)
	for _, r := range resourceProblems {
		add("%s", r)
	}
	allocatable = capacity.DeepCopy()
	for _, name := range sortedKeys(g.Allocatable) {
		q, ok := given[corev1.ResourceName(name)]
		if !ok {
			continue // already reported
		}
		c, inCapacity := capacity[corev1.ResourceName(name)]
		if !inCapacity {
			if _, given := g.Capacity[name]; !given {
				add("allocatable.%s: the resource is not in capacity", name)
			}
			continue
		}
		if q.Cmp(c) > 0 {
			add("allocatable.%s: %s is more than capacity.%s %s", name, g.Allocatable[name], name, c.String())
			continue
		}
		allocatable[corev1.ResourceName(name)] = q
	}
	return capacity, allocatable
}

// compileFailures is how the group's instances fail, nil when they never do.
func compileFailures(group string, f *FailureConfig, add problemf) *failureSpec {
	fails := f.OutOfResources || f.ErrorCode != ""
	if f.ErrorCode != "" && !errorCodeRegexp.MatchString(f.ErrorCode) {
		add("failures.errorCode: %q must be 1 to 63 letters, digits, '_', '-' or '.'", f.ErrorCode)
	}
	if f.Message != "" && !fails {
		add("failures.message is set but instances never fail: set failures.outOfResources or failures.errorCode")
	}
	failAfter := -1
	if f.FailAfter != nil {
		switch {
		case *f.FailAfter < 0:
			add("failures.failAfter %d is negative", *f.FailAfter)
		case !fails:
			add("failures.failAfter is set but instances never fail: set failures.outOfResources or failures.errorCode")
		default:
			failAfter = *f.FailAfter
		}
	}
	if !fails {
		return nil
	}
	fs := &failureSpec{class: "Other", code: f.ErrorCode, message: f.Message, failAfter: failAfter}
	if f.OutOfResources {
		fs.class = "OutOfResources"
	}
	if fs.code == "" {
		fs.code = ErrorCodeCreateFailed
		if f.OutOfResources {
			fs.code = ErrorCodeOutOfResources
		}
	}
	if fs.message == "" {
		fs.message = fmt.Sprintf("kwok cloud: cannot create an instance in node group %s", group)
		if f.OutOfResources {
			fs.message = fmt.Sprintf("kwok cloud: out of resources for node group %s", group)
		}
	}
	return fs
}

// parseResources parses a resource map, reporting each bad name or quantity.
func parseResources(field string, in map[string]string) (corev1.ResourceList, []string) {
	out := corev1.ResourceList{}
	var problems []string
	for _, name := range sortedKeys(in) {
		v := in[name]
		if len(content.IsLabelKey(name)) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %q is not a valid resource name", field, name))
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s.%s: %q is not a quantity", field, name, v))
			continue
		}
		if q.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("%s.%s: %q is negative", field, name, v))
			continue
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, problems
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
