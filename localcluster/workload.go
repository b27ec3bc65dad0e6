package localcluster

import (
	"context"
	"fmt"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/scheduling/podgroupprotection"
	"k8s.io/kubernetes/pkg/features"
)

// The Workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup) is beta in
// Kubernetes 1.37 and off by default: its gate, GenericWorkload, must be on in
// the API server, the scheduler (which then adds its GangScheduling plugin to
// every profile) and the controller manager, and the API server must serve the
// beta group version. localcluster turns it on so that gangs can be tried.
//
// Every component here reads the gate from the process-wide
// utilfeature.DefaultFeatureGate: the scheduler's plugin defaults, the
// framework, the controllers and the API server's registry. So does the
// autoscaler's scheduling simulation when it runs in the same process (tests,
// `make local-up` without --no-autoscaler): it simulates with the
// GangScheduling plugin in its profile, as the real scheduler beside it
// schedules. The gate is set once and never reverted, so that clusters started
// one after another, or side by side, in one process agree.
var workloadAPIServerFlags = []string{
	"--feature-gates=" + string(features.GenericWorkload) + "=true",
	"--runtime-config=scheduling.k8s.io/v1beta1=true",
}

var enableWorkloadOnce = sync.OnceValue(func() error {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.GenericWorkload): true}); err != nil {
		return fmt.Errorf("turning the %s feature gate on: %w", features.GenericWorkload, err)
	}
	return nil
})

// enableWorkloadAPI turns GenericWorkload on in this process, before any
// component starts.
func enableWorkloadAPI() error { return enableWorkloadOnce() }

// newPodGroupProtection is kube-controller-manager's PodGroupProtection
// controller. It is needed, not optional: with the gate on, the API server's
// PodGroupProtection admission plugin (on by default) puts a finalizer on
// every PodGroup, and only this controller takes it off once no pod uses the
// group; without it a deleted PodGroup, and its namespace, would never go.
func newPodGroupProtection(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface) (func(context.Context), error) {
	ctrl, err := podgroupprotection.NewPodGroupProtectionController(klog.FromContext(ctx).WithName("podgroup-protection"),
		factory.Scheduling().V1beta1().PodGroups(), factory.Core().V1().Pods(), client)
	if err != nil {
		return nil, fmt.Errorf("podgroup protection controller: %w", err)
	}
	return func(ctx context.Context) { ctrl.Run(ctx, 1) }, nil
}
