package localcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
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

// kwokMachinePoolReconciler keeps a KwokMachinePool's instances at its
// MachinePool's replicas, as a cloud's scaling group would: new instances
// register their node after the provisioning delay, and scaling down removes
// the newest instances, unregistered ones first (the pool, not the caller,
// chooses which, as with a cloud's scaling group).
type kwokMachinePoolReconciler struct {
	client   client.Client
	workload kubernetes.Interface
	now      func() time.Time
}

const kwokMachinePoolFinalizer = "kwokmachinepool.infrastructure.cluster.x-k8s.io"

func (r *kwokMachinePoolReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kwokmachinepool").
		For(newUnstructured(kwokMachinePoolGVK)).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			mp, ok := obj.(*clusterv1.MachinePool)
			if !ok || mp.Spec.Template.Spec.InfrastructureRef.Kind != KwokMachinePoolKind {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: mp.Spec.Template.Spec.InfrastructureRef.Name}}}
		})).
		Complete(r)
}

func (r *kwokMachinePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := newUnstructured(kwokMachinePoolGVK)
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var pool kwokMachinePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("decoding KwokMachinePool %s: %w", req.NamespacedName, err))
	}
	if !u.GetDeletionTimestamp().IsZero() {
		for _, in := range pool.Status.Instances {
			if err := r.deleteInstance(ctx, in); err != nil {
				return ctrl.Result{}, err
			}
		}
		controllerutil.RemoveFinalizer(u, kwokMachinePoolFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, u))
	}
	if controllerutil.AddFinalizer(u, kwokMachinePoolFinalizer) {
		return ctrl.Result{}, r.client.Update(ctx, u)
	}
	owner := metav1.GetControllerOf(u)
	if owner == nil || owner.Kind != "MachinePool" {
		return ctrl.Result{}, nil
	}
	mp := &clusterv1.MachinePool{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: owner.Name}, mp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, nil
	}
	delay, err := parseDelay(pool.Spec.ProvisioningDelay)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("KwokMachinePool %s: %w", req.NamespacedName, err))
	}

	now := r.now()
	instances := pool.Status.Instances
	for want := int(ptr.Deref(mp.Spec.Replicas, 0)); len(instances) < want; {
		instances = append(instances, poolInstance{Name: u.GetName() + "-" + rand.String(5), Created: metav1.NewTime(now)})
	}
	for want := int(ptr.Deref(mp.Spec.Replicas, 0)); len(instances) > want; {
		i := len(instances) - 1
		for j := len(instances) - 1; j >= 0; j-- {
			if instances[j].ProviderID == "" {
				i = j
				break
			}
		}
		if err := r.deleteInstance(ctx, instances[i]); err != nil {
			return ctrl.Result{}, err
		}
		instances = slices.Delete(instances, i, i+1)
	}
	var requeue time.Duration
	var providerIDs []string
	for i := range instances {
		in := &instances[i]
		if in.ProviderID == "" {
			if wait := in.Created.Add(delay).Sub(now); wait > 0 {
				requeue = minPositive(requeue, wait)
				continue
			}
			id := kwokProviderIDPrefix + u.GetNamespace() + "/" + u.GetName() + "/" + in.Name
			node := kwokMachineNode(in.Name, id, pool.Spec.Node)
			node.Status.NodeInfo.KubeletVersion = mp.Spec.Template.Spec.Version
			if _, err := r.workload.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("registering the node of KwokMachinePool %s instance %s: %w", req.NamespacedName, in.Name, err)
			}
			in.ProviderID = id
			klog.FromContext(ctx).V(2).Info("Kwok machine pool instance provisioned", "kwokMachinePool", klog.KObj(u), "node", in.Name)
		}
		providerIDs = append(providerIDs, in.ProviderID)
	}
	slices.Sort(providerIDs)

	if !slices.Equal(providerIDs, pool.Spec.ProviderIDList) {
		if err := unstructured.SetNestedStringSlice(u.Object, providerIDs, "spec", "providerIDList"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.client.Update(ctx, u); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing the instances of KwokMachinePool %s: %w", req.NamespacedName, err)
		}
	}
	status := kwokMachinePoolStatus{Ready: true, Replicas: int32(len(providerIDs)), Instances: instances,
		kwokMachineTemplateStatus: shapeStatus(pool.Spec.Node)}
	return ctrl.Result{RequeueAfter: requeue}, writeStatus(ctx, r.client, u, &status)
}

func (r *kwokMachinePoolReconciler) deleteInstance(ctx context.Context, in poolInstance) error {
	if in.ProviderID == "" {
		return nil
	}
	return kwok.DeleteNode(ctx, r.workload, in.Name)
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}
