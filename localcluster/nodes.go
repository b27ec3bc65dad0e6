package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// NodeSpec describes a kwok node.
type NodeSpec struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// Capacity is the node's status.capacity; "pods" defaults to 110.
	Capacity corev1.ResourceList
	// Allocatable defaults to Capacity.
	Allocatable corev1.ResourceList
	// Devices are the node's DRA devices, which the kwok DRA driver publishes
	// as ResourceSlices once the node exists.
	Devices []kwok.DevicePoolConfig
}

// Node builds the Node object for spec, annotated for kwok.
func (spec NodeSpec) Node() *corev1.Node {
	capacity := spec.Capacity.DeepCopy()
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	allocatable := spec.Allocatable.DeepCopy()
	if allocatable == nil {
		allocatable = capacity.DeepCopy()
	}
	if _, ok := allocatable[corev1.ResourcePods]; !ok {
		allocatable[corev1.ResourcePods] = capacity[corev1.ResourcePods]
	}
	labels := map[string]string{
		corev1.LabelHostname:   spec.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok",
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	annotations := map[string]string{KwokNodeAnnotation: "fake"}
	if len(spec.Devices) > 0 {
		// CreateNode validates them; the driver ignores a wrong declaration.
		devices, _ := json.Marshal(spec.Devices)
		annotations[kwok.DevicesAnnotation] = string(devices)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodePending,
		},
	}
}

// CreateNode creates a kwok node and waits until it is Ready.
func (c *Cluster) CreateNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	if _, err := kwok.DevicesAnnotationValue(spec.Devices); err != nil {
		return nil, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	node, err := c.Client.CoreV1().Nodes().Create(ctx, spec.Node(), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", spec.Name, err)
	}
	if err := c.WaitForNodeReady(ctx, node.Name); err != nil {
		return nil, err
	}
	return node, nil
}

// WaitForNodeReady polls until the node reports Ready.
func (c *Cluster) WaitForNodeReady(ctx context.Context, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s to be Ready: %w", name, err)
	}
	return nil
}
