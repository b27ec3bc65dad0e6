package capacityquota

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/pkg/devices"
	"github.com/quotascale/quotascale/quota/resources"
)

// nodeDevices keeps what each node's DRA devices add to its capacity, and the
// same for each group's template, so that quotas count devices as capacity.
// Counting evaluates CEL, so it is done again only for the nodes whose slices
// changed, or for all when a DeviceClass changed.
type nodeDevices struct {
	eval    *devices.Evaluator
	slices  cache.Store // nil until WatchDevices
	classes cache.Store
	current *devices.Classes
	// classesChanged asks the next loop to read the classes again and
	// recount every node.
	classesChanged bool
	dirty          map[string]bool
	counts         map[string]devices.Count
	// raw are the node objects as the informer holds them, to count again
	// with new devices.
	raw       map[string]*corev1.Node
	templates map[string]countedTemplate
}

// countedTemplate is a group's template node with its devices in capacity,
// kept while the template and the classes are unchanged.
type countedTemplate struct {
	source  *cloudprovider.NodeInfo
	classes *devices.Classes
	node    *corev1.Node
}

func newNodeDevices() *nodeDevices {
	return &nodeDevices{dirty: map[string]bool{}, counts: map[string]devices.Count{}, raw: map[string]*corev1.Node{}, templates: map[string]countedTemplate{}}
}

// WatchDevices counts the devices nodes publish as ResourceSlices, selected
// by the DeviceClasses, in their capacity. Without it (a cluster without
// DRA) no device is counted.
func (p *Processor) WatchDevices(slices, classes cache.SharedIndexInformer) error {
	p.mu.Lock()
	p.devices.slices, p.devices.classes = slices.GetStore(), classes.GetStore()
	p.devices.eval = devices.NewEvaluator(devices.DefaultFeatures)
	p.devices.classesChanged = true
	p.mu.Unlock()
	onSlice := func(objs ...any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, obj := range objs {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*resourcev1.ResourceSlice); ok && s.Spec.NodeName != nil {
				p.devices.dirty[*s.Spec.NodeName] = true
			}
		}
	}
	if _, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onSlice(obj) },
		UpdateFunc: func(old, obj any) { onSlice(old, obj) },
		DeleteFunc: func(obj any) { onSlice(obj) },
	}); err != nil {
		return fmt.Errorf("ResourceSlice handler: %w", err)
	}
	onClass := func() {
		p.mu.Lock()
		p.devices.classesChanged = true
		p.mu.Unlock()
	}
	if _, err := classes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onClass() },
		UpdateFunc: func(any, any) { onClass() },
		DeleteFunc: func(any) { onClass() },
	}); err != nil {
		return fmt.Errorf("DeviceClass handler: %w", err)
	}
	return nil
}

// counted is node with its devices in capacity.
func (d *nodeDevices) counted(node *corev1.Node) *corev1.Node {
	return devices.WithDevices(node, d.counts[node.Name].Resources)
}

// refreshDevicesLocked counts again the devices of the nodes whose slices or whose
// classes changed, and re-counts those nodes whose devices differ.
func (p *Processor) refreshDevicesLocked(ctx context.Context) {
	d := p.devices
	if d.slices == nil || (len(d.dirty) == 0 && !d.classesChanged) {
		return
	}
	if d.classesChanged {
		var list []*resourcev1.DeviceClass
		for _, obj := range d.classes.List() {
			if c, ok := obj.(*resourcev1.DeviceClass); ok {
				list = append(list, c)
			}
		}
		d.current = d.eval.Classes(list)
		for name := range d.counts {
			d.dirty[name] = true
		}
	}
	var all []*resourcev1.ResourceSlice
	for _, obj := range d.slices.List() {
		if s, ok := obj.(*resourcev1.ResourceSlice); ok {
			all = append(all, s)
		}
	}
	byNode := devices.CurrentByNode(all)
	if d.classesChanged {
		for name := range byNode {
			d.dirty[name] = true
		}
	}
	d.classesChanged = false
	for name := range d.dirty {
		count := d.current.Count(ctx, devices.Devices(byNode[name]))
		if len(count.Resources) == 0 && len(count.Problems) == 0 {
			count = devices.Count{} // as a node without slices, so the two compare equal
		}
		if apiequality.Semantic.DeepEqual(d.counts[name], count) {
			continue
		}
		if count.Resources == nil {
			delete(d.counts, name)
		} else {
			d.counts[name] = count
		}
		if raw := d.raw[name]; raw != nil && !isVirtualKubelet(raw) {
			p.set.UpdateNode(d.counted(raw))
		}
		for _, problem := range count.Problems {
			klog.FromContext(ctx).V(2).Info("DeviceClass selects no device on a node", "node", name, "deviceClass", problem.Class, "reason", problem.Reason)
		}
	}
	clear(d.dirty)
}

// template is the group's template node with the devices of its
// ResourceSlices in capacity.
func (d *nodeDevices) template(ctx context.Context, id string, template *cloudprovider.NodeInfo) *corev1.Node {
	if template == nil {
		return nil
	}
	if d.current == nil || len(template.ResourceSlices) == 0 {
		return template.Node
	}
	if c, ok := d.templates[id]; ok && c.source == template && c.classes == d.current {
		return c.node
	}
	count := d.current.Count(ctx, devices.Devices(devices.Current(template.ResourceSlices)))
	node := devices.WithDevices(template.Node, count.Resources)
	d.templates[id] = countedTemplate{source: template, classes: d.current, node: node}
	return node
}

// deviceNotes says, for each device-class limit of quota, what keeps it from
// counting devices: a class the cluster does not have (it may come later;
// the limit matches no device until then) or a class whose selectors fail on
// a node's devices (those devices are not counted). Sorted; nil when every
// class is found and evaluates, or when devices are not watched.
func (d *nodeDevices) deviceNotes(quota *autoscalingv1beta1.CapacityQuota) (missing bool, notes []string) {
	if d.current == nil {
		return false, nil
	}
	failed := map[string]string{}
	for _, count := range d.counts {
		for _, p := range count.Problems {
			if reason, seen := failed[p.Class]; !seen || p.Reason < reason {
				failed[p.Class] = p.Reason
			}
		}
	}
	for name := range quota.Spec.Limits.Resources {
		class, ok := resources.DeviceClassOf(corev1.ResourceName(name))
		if !ok {
			continue
		}
		if _, found := d.current.Get(class); !found {
			missing = true
			notes = append(notes, fmt.Sprintf("%s matches no device: no DeviceClass %q", name, class))
		} else if reason, bad := failed[class]; bad {
			notes = append(notes, fmt.Sprintf("%s does not count the devices its selectors fail on: %s", name, reason))
		}
	}
	slices.Sort(notes)
	return missing, notes
}
