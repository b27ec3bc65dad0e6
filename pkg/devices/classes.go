package devices

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/quota/resources"
)

// ErrClassNotFound is returned for a class the cluster does not have. A limit
// or a claim may name a class before it is created.
var ErrClassNotFound = errors.New("DeviceClass not found")

// Classes are the cluster's DeviceClasses, ready to select devices. Build
// them again when a class changes; compiled selectors are kept by the
// Evaluator, so that costs little.
type Classes struct {
	eval   *Evaluator
	byName map[string]*resourcev1.DeviceClass
	// names are the classes sorted, so counts and problems come out in one
	// order.
	names []string
	// extended maps an extended resource name to the classes that serve it
	// (spec.extendedResourceName), sorted.
	extended map[corev1.ResourceName][]int
}

// Classes reads list; nil entries are skipped and of two classes with one
// name (impossible in one cluster) the first is kept.
func (e *Evaluator) Classes(list []*resourcev1.DeviceClass) *Classes {
	c := &Classes{eval: e, byName: map[string]*resourcev1.DeviceClass{}, extended: map[corev1.ResourceName][]int{}}
	for _, class := range list {
		if class == nil || c.byName[class.Name] != nil {
			continue
		}
		c.byName[class.Name] = class
		c.names = append(c.names, class.Name)
	}
	slices.Sort(c.names)
	for i, name := range c.names {
		if ext := c.byName[name].Spec.ExtendedResourceName; ext != nil && *ext != "" {
			c.extended[corev1.ResourceName(*ext)] = append(c.extended[corev1.ResourceName(*ext)], i)
		}
	}
	return c
}

// Get returns the class of that name.
func (c *Classes) Get(name string) (*resourcev1.DeviceClass, bool) {
	class, ok := c.byName[name]
	return class, ok
}

// Serving names the classes whose spec.extendedResourceName is name, sorted:
// a pod asking for that extended resource is served by their devices.
func (c *Classes) Serving(name corev1.ResourceName) []string {
	out := make([]string, 0, len(c.extended[name]))
	for _, i := range c.extended[name] {
		out = append(out, c.names[i])
	}
	return out
}

// Matches reports whether device belongs to class and passes a claim
// request's own selectors as well (nil for none), as the scheduler's
// allocator decides it. Errors name the class or the request's selectors and
// wrap ErrClassNotFound or ErrSelector; the device is then not selected.
func (c *Classes) Matches(ctx context.Context, class string, requestSelectors []resourcev1.DeviceSelector, device Device) (bool, error) {
	obj, ok := c.byName[class]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrClassNotFound, class)
	}
	matches, err := c.eval.Matches(ctx, obj.Spec.Selectors, device)
	if err != nil || !matches {
		if err != nil {
			err = fmt.Errorf("DeviceClass %s: %w", class, err)
		}
		return false, err
	}
	matches, err = c.eval.Matches(ctx, requestSelectors, device)
	if err != nil {
		err = fmt.Errorf("request selectors: %w", err)
	}
	return matches, err
}

// Problem is a class whose selectors failed on at least one device; the
// devices it failed on are counted for no class through it.
type Problem struct {
	Class  string
	Reason string
}

// Count is what one node's devices add to quotas.
type Count struct {
	// Resources holds, for each class that selects at least one device, the
	// number of devices it selects under its ResourceQuota name
	// (resources.DeviceClassResource); and for each extended resource name a
	// class serves, the devices that any class serving it selects, each once.
	Resources corev1.ResourceList
	// Problems are sorted by class, one per class (its first failure).
	Problems []Problem
}

// Count counts devices (one node's, Devices of CurrentByNode) per class. A
// selector that fails on a device keeps that device out of that class's
// count and is reported once per class; it never panics and never counts a
// device twice for one name.
func (c *Classes) Count(ctx context.Context, devices []Device) Count {
	perClass := make([]int64, len(c.names))
	perExtended := make(map[corev1.ResourceName]int64, len(c.extended))
	failed := make([]string, len(c.names))
	matched := make([]bool, len(c.names))
	for _, d := range devices {
		for i, name := range c.names {
			ok, err := c.eval.Matches(ctx, c.byName[name].Spec.Selectors, d)
			if err != nil && failed[i] == "" {
				failed[i] = err.Error()
			}
			matched[i] = ok
			if ok {
				perClass[i]++
			}
		}
		for ext, classes := range c.extended {
			if slices.ContainsFunc(classes, func(i int) bool { return matched[i] }) {
				perExtended[ext]++
			}
		}
	}
	out := Count{Resources: corev1.ResourceList{}}
	for i, name := range c.names {
		if perClass[i] > 0 {
			out.Resources[resources.DeviceClassResource(name)] = *resource.NewQuantity(perClass[i], resource.DecimalSI)
		}
		if failed[i] != "" {
			out.Problems = append(out.Problems, Problem{Class: name, Reason: fmt.Sprintf("DeviceClass %s: %s", name, failed[i])})
		}
	}
	for ext, n := range perExtended {
		out.Resources[ext] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	slices.SortFunc(out.Problems, func(a, b Problem) int { return strings.Compare(a.Class, b.Class) })
	return out
}
