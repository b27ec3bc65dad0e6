package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// kwokMachineFinalizer keeps a KwokMachine until its node is gone.
const kwokMachineFinalizer = "kwokmachine.infrastructure.cluster.x-k8s.io"

// kwokProviderIDPrefix starts the provider ID of every kwok machine:
// kwok-capi://NAMESPACE/NAME.
const kwokProviderIDPrefix = "kwok-capi://"

// kwokMachineReconciler provisions KwokMachines. It plays both the cloud and
// the machine's kubelet: once the provisioning delay has passed (read, like
// the failure to inject, from the machine's template at that moment, as a
// cloud's current conditions) it registers the machine's node in the workload
// cluster and reports the machine provisioned with its provider ID, or
// reports the failure. Deleting a KwokMachine deletes its node and, standing
// in for the pod garbage collector, the pods bound to it.
type kwokMachineReconciler struct {
	client   client.Client
	workload kubernetes.Interface
	now      func() time.Time
}

func (r *kwokMachineReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kwokmachine").
		For(newUnstructured(kwokMachineGVK)).
		// A Machine that gets its bootstrap data, or goes away, requeues its
		// infrastructure machine.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			m, ok := obj.(*clusterv1.Machine)
			if !ok || m.Spec.InfrastructureRef.Kind != KwokMachineKind || m.Spec.InfrastructureRef.APIGroup != InfrastructureGroup {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
		})).
		Complete(r)
}

func (r *kwokMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := newUnstructured(kwokMachineGVK)
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var m kwokMachine
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
		return ctrl.Result{}, fmt.Errorf("decoding KwokMachine %s: %w", req.NamespacedName, err)
	}
	if !u.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.delete(ctx, u)
	}
	if controllerutil.AddFinalizer(u, kwokMachineFinalizer) {
		return ctrl.Result{}, r.client.Update(ctx, u)
	}
	if m.Status.FailureReason != "" || (m.Status.Initialization != nil && ptr.Deref(m.Status.Initialization.Provisioned, false)) {
		return ctrl.Result{}, nil
	}
	// Like any provider, wait for the Machine that owns this one and its
	// bootstrap data.
	owner := metav1.GetControllerOf(u)
	if owner == nil || owner.Kind != "Machine" {
		return ctrl.Result{}, nil
	}
	machine := &clusterv1.Machine{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: owner.Name}, machine); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, nil
	}

	spec, err := r.currentSpec(ctx, u, m.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	delay, err := parseDelay(spec.ProvisioningDelay)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("KwokMachine %s: %w", req.NamespacedName, err))
	}
	if wait := u.GetCreationTimestamp().Add(delay).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if f := spec.Failure; f != nil {
		fails := true
		if f.FailAfter != nil {
			provisioned, err := r.provisionedSiblings(ctx, u)
			if err != nil {
				return ctrl.Result{}, err
			}
			fails = provisioned >= *f.FailAfter
		}
		if fails {
			return ctrl.Result{}, r.fail(ctx, u, f)
		}
	}
	return ctrl.Result{}, r.provision(ctx, u, machine, spec.Node)
}

// currentSpec is the machine's spec with the provisioning delay and the
// failure of the template it was cloned from, as the template says now.
func (r *kwokMachineReconciler) currentSpec(ctx context.Context, u *unstructured.Unstructured, own KwokMachineSpec) (KwokMachineSpec, error) {
	name := u.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	if name == "" {
		return own, nil
	}
	t := newUnstructured(kwokMachineTemplateGVK)
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: name}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return own, nil
		}
		return own, err
	}
	var tmpl kwokMachineTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(t.Object, &tmpl); err != nil {
		return own, fmt.Errorf("decoding KwokMachineTemplate %s/%s: %w", u.GetNamespace(), name, err)
	}
	own.ProvisioningDelay = tmpl.Spec.Template.Spec.ProvisioningDelay
	own.Failure = tmpl.Spec.Template.Spec.Failure
	return own, nil
}

// provisionedSiblings counts the provisioned machines cloned from the same
// template.
func (r *kwokMachineReconciler) provisionedSiblings(ctx context.Context, u *unstructured.Unstructured) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kwokMachineGVK.GroupVersion().WithKind(KwokMachineKind + "List"))
	if err := r.client.List(ctx, list, client.InNamespace(u.GetNamespace())); err != nil {
		return 0, fmt.Errorf("listing KwokMachines: %w", err)
	}
	template := u.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	n := 0
	for i := range list.Items {
		item := &list.Items[i]
		provisioned, _, _ := unstructured.NestedBool(item.Object, "status", "initialization", "provisioned")
		if provisioned && item.GetDeletionTimestamp().IsZero() && item.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation] == template {
			n++
		}
	}
	return n, nil
}

func (r *kwokMachineReconciler) fail(ctx context.Context, u *unstructured.Unstructured, f *KwokFailure) error {
	reason := CreateMachineError
	if f.OutOfResources {
		reason = InsufficientResourcesMachineError
	}
	message := f.Message
	if message == "" {
		message = "kwok infrastructure: cannot create the machine"
	}
	if f.Code != "" {
		message = f.Code + ": " + message
	}
	status := kwokMachineStatus{FailureReason: reason, FailureMessage: message}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: reason, Message: message})
	klog.FromContext(ctx).V(2).Info("Kwok machine failed to provision", "kwokMachine", klog.KObj(u), "reason", reason, "message", message)
	return r.patchStatus(ctx, u, status)
}

// provision registers the node, then reports the machine provisioned: a
// provisioned machine always has its node.
func (r *kwokMachineReconciler) provision(ctx context.Context, u *unstructured.Unstructured, machine *clusterv1.Machine, spec KwokNodeSpec) error {
	providerID := kwokProviderIDPrefix + u.GetNamespace() + "/" + u.GetName()
	node := kwokMachineNode(machine.Name, providerID, spec)
	// kwok reports the kubelet version a node registered with.
	node.Status.NodeInfo.KubeletVersion = machine.Spec.Version
	// As a cloud's: the instance has its provider ID before its kubelet can
	// register a node.
	if err := unstructured.SetNestedField(u.Object, providerID, "spec", "providerID"); err != nil {
		return err
	}
	if err := r.client.Update(ctx, u); err != nil {
		return fmt.Errorf("setting the provider ID of KwokMachine %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if _, err := r.workload.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering the node of KwokMachine %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	status := kwokMachineStatus{Initialization: &machineInitialization{Provisioned: ptr.To(true)}}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Provisioned"})
	klog.FromContext(ctx).V(2).Info("Kwok machine provisioned", "kwokMachine", klog.KObj(u), "node", node.Name)
	return r.patchStatus(ctx, u, status)
}

func (r *kwokMachineReconciler) patchStatus(ctx context.Context, u *unstructured.Unstructured, status kwokMachineStatus) error {
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = u.GetGeneration()
	}
	return writeStatus(ctx, r.client, u, &status)
}

// writeStatus replaces u's status with status through a merge patch of the
// status subresource.
func writeStatus(ctx context.Context, c client.Client, u *unstructured.Unstructured, status any) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return err
	}
	patch := u.DeepCopy()
	patch.Object["status"] = raw
	if err := c.Status().Patch(ctx, patch, client.MergeFrom(u)); err != nil {
		return fmt.Errorf("reporting the status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// shapeStatus is what a template or a pool reports of its nodes for
// autoscaling from zero: their capacity (pods defaulted) and system.
func shapeStatus(spec KwokNodeSpec) kwokMachineTemplateStatus {
	node := NodeSpec{Capacity: spec.Capacity}.Node()
	return kwokMachineTemplateStatus{
		Capacity: node.Status.Capacity,
		NodeInfo: &nodeInfo{Architecture: node.Labels[corev1.LabelArchStable], OperatingSystem: node.Labels[corev1.LabelOSStable]},
	}
}

// delete removes the machine's node, if it registered one, and lets the
// KwokMachine go.
func (r *kwokMachineReconciler) delete(ctx context.Context, u *unstructured.Unstructured) error {
	if !controllerutil.ContainsFinalizer(u, kwokMachineFinalizer) {
		return nil
	}
	if id, _, _ := unstructured.NestedString(u.Object, "spec", "providerID"); id != "" {
		nodes, err := r.workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes for KwokMachine %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		for _, n := range nodes.Items {
			if n.Spec.ProviderID == id {
				if err := kwok.DeleteNode(ctx, r.workload, n.Name); err != nil {
					return err
				}
			}
		}
	}
	controllerutil.RemoveFinalizer(u, kwokMachineFinalizer)
	return client.IgnoreNotFound(r.client.Update(ctx, u))
}

// kwokMachineNode is the node a machine registers, named after its Machine as
// kubeadm names nodes after their host, and managed by kwok.
func kwokMachineNode(name, providerID string, spec KwokNodeSpec) *corev1.Node {
	node := NodeSpec{Name: name, Labels: spec.Labels, Taints: spec.Taints, Capacity: spec.Capacity, Allocatable: spec.Allocatable,
		Devices: spec.Devices}.Node()
	node.Spec.ProviderID = providerID
	return node
}

// kwokMachineTemplateReconciler reports, on every KwokMachineTemplate, the
// capacity and system of the nodes its machines register: Cluster API's
// opt-in contract for autoscaling from zero.
type kwokMachineTemplateReconciler struct {
	client client.Client
}

func (r *kwokMachineTemplateReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("kwokmachinetemplate").For(newUnstructured(kwokMachineTemplateGVK)).Complete(r)
}

func (r *kwokMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := newUnstructured(kwokMachineTemplateGVK)
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var t kwokMachineTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("decoding KwokMachineTemplate %s: %w", req.NamespacedName, err))
	}
	want := shapeStatus(t.Spec.Template.Spec.Node)
	if apiequality.Semantic.DeepEqual(want, t.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, writeStatus(ctx, r.client, u, &want)
}

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func parseDelay(text string) (time.Duration, error) {
	if text == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("provisioningDelay %q is not a non-negative duration such as \"2s\"", text)
	}
	return d, nil
}
