package simulator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodCheck is one pod's PreFilter run, reusable for every node it is checked
// against: PreFilter is per pod, Filter per node.
type PodCheck struct {
	fw     *Framework
	pod    *corev1.Pod
	state  fwk.CycleState
	status *fwk.Status
}

// PreFilter runs the PreFilter plugins for pod against the current snapshot.
func (f *Framework) PreFilter(ctx context.Context, pod *corev1.Pod) *PodCheck {
	state := framework.NewCycleState()
	_, status, _ := f.RunPreFilterPlugins(f.pluginContext(ctx), state, pod)
	if status.IsSkip() {
		status = nil
	}
	return &PodCheck{fw: f, pod: pod, state: state, status: status}
}

// Fits runs the Filter plugins for the pod on info. A PreFilter refusal refuses
// every node.
func (c *PodCheck) Fits(ctx context.Context, info fwk.NodeInfo) *fwk.Status {
	if !c.status.IsSuccess() {
		return c.status
	}
	return c.fw.RunFilterPlugins(c.fw.pluginContext(ctx), c.state, c.pod, info)
}

// Pod is the pod checked.
func (c *PodCheck) Pod() *corev1.Pod { return c.pod }

// PreFilterStatus is the PreFilter outcome; nil is success.
func (c *PodCheck) PreFilterStatus() *fwk.Status { return c.status }
