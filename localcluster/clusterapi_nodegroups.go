package localcluster

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// Upstream cluster autoscaler's annotations on a Cluster API scalable
// resource, which Cluster API itself leaves alone.
const (
	nodeGroupMinSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	nodeGroupMaxSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	capacityLabelsAnnotation   = "capacity.cluster-autoscaler.kubernetes.io/labels"
	capacityTaintsAnnotation   = "capacity.cluster-autoscaler.kubernetes.io/taints"
	capacityGPUCountAnnotation = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	// capacityDRADriverAnnotation names the DRA driver of the gpu-count GPUs.
	capacityDRADriverAnnotation = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"
)

// MachineDeploymentGroup describes a node group made of a MachineDeployment and
// the KwokMachineTemplate of its machines.
type MachineDeploymentGroup struct {
	Namespace, Name string
	// ClusterName is the Cluster the machines join.
	ClusterName string
	// MinSize and MaxSize become the autoscaler's size annotations; the
	// deployment starts at Replicas, or at MinSize replicas when nil, as
	// Cluster API's defaulting webhook sets it from them.
	MinSize, MaxSize int
	Replicas         *int32
	// Machine is what each machine is; its node labels and taints are also
	// written as the autoscaler's capacity annotations, so that the group can
	// scale from zero with the labels its nodes will have.
	Machine KwokMachineSpec
	// ExtraAnnotations are added to the MachineDeployment (for example the
	// capacity annotations for cpu and memory).
	ExtraAnnotations map[string]string
}

// MachineDeploymentGroupFromShape is the node group a kwok cloud config
// describes, on Cluster API. failures.increaseSizeError has no counterpart:
// the scale subresource does not fail on a cloud's behalf.
func MachineDeploymentGroupFromShape(namespace, cluster string, g kwok.NodeGroupShape) (MachineDeploymentGroup, error) {
	if g.IncreaseSizeError != "" {
		return MachineDeploymentGroup{}, fmt.Errorf("node group %s: failures.increaseSizeError cannot be injected on Cluster API", g.Name)
	}
	spec := KwokMachineSpec{Node: KwokNodeSpec{Labels: g.Labels, Taints: g.Taints, Capacity: g.Capacity, Allocatable: g.Allocatable,
		Devices: g.Devices}}
	if g.ProvisioningDelay > 0 {
		spec.ProvisioningDelay = g.ProvisioningDelay.String()
	}
	if f := g.Failure; f != nil {
		spec.Failure = &KwokFailure{OutOfResources: f.OutOfResources, Code: f.Code, Message: f.Message}
		if f.FailAfter >= 0 {
			spec.Failure.FailAfter = ptr.To(f.FailAfter)
		}
	}
	return MachineDeploymentGroup{Namespace: namespace, Name: g.Name, ClusterName: cluster, MinSize: g.MinSize, MaxSize: g.MaxSize, Machine: spec}, nil
}

// CreateMachineDeployment creates the group's KwokMachineTemplate and
// MachineDeployment, filled in the way Cluster API's defaulting webhooks
// would (localcluster runs no webhooks): cluster and deployment labels on the
// selector and the template, a RollingUpdate strategy.
func (a *ClusterAPI) CreateMachineDeployment(ctx context.Context, g MachineDeploymentGroup) (*clusterv1.MachineDeployment, error) {
	c, err := a.management.ctrlClient()
	if err != nil {
		return nil, err
	}
	template := newUnstructured(kwokMachineTemplateGVK)
	template.SetNamespace(g.Namespace)
	template.SetName(g.Name)
	template.SetLabels(map[string]string{clusterv1.ClusterNameLabel: g.ClusterName})
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&g.Machine)
	if err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedMap(template.Object, spec, "spec", "template", "spec"); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, template); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating KwokMachineTemplate %s/%s: %w", g.Namespace, g.Name, err)
	}

	annotations := g.annotations()
	labels := map[string]string{clusterv1.ClusterNameLabel: g.ClusterName, clusterv1.MachineDeploymentNameLabel: g.Name}
	// The machines run the Kubernetes version localcluster is built from,
	// which their nodes report as their kubelet's, so that Cluster API finds
	// them up to date.
	version, err := linkedVersion(ctx, "k8s.io/kubernetes")
	if err != nil {
		return nil, err
	}
	replicas := ptr.To(int32(g.MinSize))
	if g.Replicas != nil {
		replicas = g.Replicas
	}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name, Annotations: annotations,
			Labels: map[string]string{clusterv1.ClusterNameLabel: g.ClusterName}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: g.ClusterName,
			Replicas:    replicas,
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: machineTemplate(g, labels, KwokMachineTemplateKind, version),
		},
	}
	if err := c.Create(ctx, md); err != nil {
		return nil, fmt.Errorf("creating MachineDeployment %s/%s: %w", g.Namespace, g.Name, err)
	}
	return md, nil
}

// SetMachineTemplate changes what the group's machines do from now on: the
// provisioning delay and failure are read when a machine provisions, as a
// cloud's current conditions.
func (a *ClusterAPI) SetMachineTemplate(ctx context.Context, namespace, name, provisioningDelay string, failure *KwokFailure) error {
	c, err := a.management.ctrlClient()
	if err != nil {
		return err
	}
	template := newUnstructured(kwokMachineTemplateGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, template); err != nil {
		return fmt.Errorf("reading KwokMachineTemplate %s/%s: %w", namespace, name, err)
	}
	base := template.DeepCopy()
	if provisioningDelay == "" {
		unstructured.RemoveNestedField(template.Object, "spec", "template", "spec", "provisioningDelay")
	} else if err := unstructured.SetNestedField(template.Object, provisioningDelay, "spec", "template", "spec", "provisioningDelay"); err != nil {
		return err
	}
	if failure == nil {
		unstructured.RemoveNestedField(template.Object, "spec", "template", "spec", "failure")
	} else {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(failure)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedMap(template.Object, raw, "spec", "template", "spec", "failure"); err != nil {
			return err
		}
	}
	if err := c.Patch(ctx, template, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("changing KwokMachineTemplate %s/%s: %w", namespace, name, err)
	}
	return nil
}

// machineTemplate is the group's machines as a scalable resource makes them:
// joining the Cluster, bootstrapped from a data Secret name (no bootstrap
// provider runs; the kwok node spec is the machine's only "bootstrap data"),
// on the kwok infrastructure of kind, running version.
func machineTemplate(g MachineDeploymentGroup, labels map[string]string, kind, version string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{
		ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: g.ClusterName,
			Version:     kubeletVersion(version),
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(g.Name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: InfrastructureGroup, Kind: kind, Name: g.Name,
			},
		},
	}
}

// annotations are the autoscaler's on the group's scalable resource: its
// sizes, and its nodes' labels and taints for scale from zero.
func (g MachineDeploymentGroup) annotations() map[string]string {
	annotations := map[string]string{
		nodeGroupMinSizeAnnotation: strconv.Itoa(g.MinSize),
		nodeGroupMaxSizeAnnotation: strconv.Itoa(g.MaxSize),
	}
	if len(g.Machine.Node.Labels) > 0 {
		annotations[capacityLabelsAnnotation] = labelsAnnotation(g.Machine.Node.Labels)
	}
	if len(g.Machine.Node.Taints) > 0 {
		annotations[capacityTaintsAnnotation] = taintsAnnotation(g.Machine.Node.Taints)
	}
	// Upstream's annotations describe one DRA driver's GPUs, so that the
	// group scales from zero for pods with claims; more pools than one
	// cannot be described, and the group then scales from zero without them.
	if devices := g.Machine.Node.Devices; len(devices) == 1 {
		annotations[capacityDRADriverAnnotation] = devices[0].Driver
		annotations[capacityGPUCountAnnotation] = strconv.Itoa(devices[0].Count)
	}
	for k, v := range g.ExtraAnnotations {
		annotations[k] = v
	}
	return annotations
}

// labelsAnnotation is upstream's "key=value,key=value" format, sorted.
func labelsAnnotation(labels map[string]string) string {
	items := make([]string, 0, len(labels))
	for k, v := range labels {
		items = append(items, k+"="+v)
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

// taintsAnnotation is upstream's "key=value:Effect,key:Effect" format.
func taintsAnnotation(taints []corev1.Taint) string {
	items := make([]string, 0, len(taints))
	for _, t := range taints {
		kv := t.Key
		if t.Value != "" {
			kv += "=" + t.Value
		}
		items = append(items, kv+":"+string(t.Effect))
	}
	return strings.Join(items, ",")
}

// CreateNodeGroups turns every node group of a kwok cloud config into a
// MachineDeployment of cluster in namespace, and returns their names.
func (a *ClusterAPI) CreateNodeGroups(ctx context.Context, namespace, cluster string, config []byte) ([]string, error) {
	cfg, err := kwok.ParseConfig(config)
	if err != nil {
		return nil, err
	}
	shapes, err := cfg.NodeGroupShapes()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(shapes))
	for _, shape := range shapes {
		g, err := MachineDeploymentGroupFromShape(namespace, cluster, shape)
		if err != nil {
			return nil, err
		}
		if _, err := a.CreateMachineDeployment(ctx, g); err != nil {
			return nil, err
		}
		names = append(names, g.Name)
	}
	return names, nil
}

// kubeletVersion is a Kubernetes version as Cluster API takes it (vX.Y.Z),
// or empty.
func kubeletVersion(gitVersion string) string {
	v, err := utilversion.ParseSemantic(gitVersion)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch())
}

// CreateMachinePool creates the group as a MachinePool and its
// KwokMachinePool (g.Machine's node and provisioning delay; failures are for
// machines only).
func (a *ClusterAPI) CreateMachinePool(ctx context.Context, g MachineDeploymentGroup) (*clusterv1.MachinePool, error) {
	c, err := a.management.ctrlClient()
	if err != nil {
		return nil, err
	}
	pool := newUnstructured(kwokMachinePoolGVK)
	pool.SetNamespace(g.Namespace)
	pool.SetName(g.Name)
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&KwokMachineSpec{Node: g.Machine.Node, ProvisioningDelay: g.Machine.ProvisioningDelay})
	if err != nil {
		return nil, err
	}
	pool.Object["spec"] = spec
	if err := c.Create(ctx, pool); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating KwokMachinePool %s/%s: %w", g.Namespace, g.Name, err)
	}
	version, err := linkedVersion(ctx, "k8s.io/kubernetes")
	if err != nil {
		return nil, err
	}
	replicas := ptr.To(int32(g.MinSize))
	if g.Replicas != nil {
		replicas = g.Replicas
	}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name, Annotations: g.annotations(),
			Labels: map[string]string{clusterv1.ClusterNameLabel: g.ClusterName}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: g.ClusterName,
			Replicas:    replicas,
			Template:    machineTemplate(g, map[string]string{clusterv1.ClusterNameLabel: g.ClusterName}, KwokMachinePoolKind, version),
		},
	}
	if err := c.Create(ctx, mp); err != nil {
		return nil, fmt.Errorf("creating MachinePool %s/%s: %w", g.Namespace, g.Name, err)
	}
	return mp, nil
}
