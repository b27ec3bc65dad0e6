package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cmd/kubectl-quota/cli"
	"github.com/quotascale/quotascale/localcluster"
)

// The device scene's cast: the gpu-2x node group of examples/nodegroups.yaml
// (two GPUs a machine, published by the kwok DRA driver), a DeviceClass that
// serves nvidia.com/gpu, so that seed 000's tree counts its claims under that
// name, and a CapacityQuota of one machine's GPUs.
const (
	gpuClass        = "gpu.example.com"
	gpuDevices      = gpuClass + ".deviceclass.resource.k8s.io/devices"
	gpuQuota        = "gpu-devices"
	gpuGroupLabel   = "example.com/accelerator"
	gpuTaintKey     = "example.com/gpu"
	gpuTeam         = "namespace1" // root.a.1: nvidia.com/gpu max 2
	gpuSecondTeam   = "namespace2" // root.a.2: nvidia.com/gpu max 2
	gpuClaimsPerPod = 1
)

var gpuQuotaManifest = []byte(`apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata:
  name: ` + gpuQuota + `
spec:
  selector:
    matchLabels:
      ` + gpuGroupLabel + `: gpu
  limits:
    resources:
      ` + gpuDevices + `: 2
`)

// playDevices shows GPUs that come through Dynamic Resource Allocation
// counted in both quotas: a team's claims stop at its leaf's max, and the
// autoscaler stops adding GPU machines at a CapacityQuota on the device class.
func playDevices(ctx context.Context, env Env, out io.Writer) error {
	c := env.Cluster
	section(out, "GPUs through DRA: claims count in the tree and in the CapacityQuota")
	if err := clearSeedNamespaces(ctx, c); err != nil {
		return err
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuClass}, Spec: resourcev1.DeviceClassSpec{
		Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpuClass)}}},
		ExtendedResourceName: ptr.To("nvidia.com/gpu"),
	}}
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating DeviceClass %s: %w", gpuClass, err)
	}
	if _, err := c.Apply(ctx, gpuQuotaManifest); err != nil {
		return err
	}
	fmt.Fprintf(out, "DeviceClass %s (its devices also count as nvidia.com/gpu) and CapacityQuota %s:\n", gpuClass, gpuQuota)
	fmt.Fprintf(out, "  %s: 2 on the gpu-2x machines (two GPUs each): one machine's worth.\n", gpuDevices)

	for _, ns := range []string{gpuTeam, gpuSecondTeam} {
		if err := createClaimTemplate(ctx, c, ns); err != nil {
			return err
		}
	}
	if err := createGPUWorkload(ctx, c, gpuTeam, "trainer", 3); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s (leaf root.a.1, nvidia.com/gpu max 2) runs 3 pods, each with a claim for one GPU:\n", gpuTeam)
	if err := waitGPUPods(ctx, c, gpuTeam, 2, 1); err != nil {
		return err
	}
	fmt.Fprintln(out, "one gpu-2x machine added; 2 pods running, 1 pending. Its event:")
	event, err := latestEvent(ctx, c, gpuTeam, "FailedScheduling", "nvidia.com/gpu")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Warning  FailedScheduling  default-scheduler  %s\n", event)

	if err := createGPUWorkload(ctx, c, gpuSecondTeam, "evaluator", 2); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s (leaf root.a.2, room for 2 GPUs) runs 2 pods with one-GPU claims; the tree admits them,\n", gpuSecondTeam)
	fmt.Fprintln(out, "but a second machine would take the gpu-2x machines past the CapacityQuota:")
	event, err = latestEvent(ctx, c, gpuSecondTeam, "NotTriggerScaleUp", gpuQuota)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Normal  NotTriggerScaleUp  cluster-autoscaler  %s\n", event)
	if err := waitGPUPods(ctx, c, gpuSecondTeam, 0, 2); err != nil {
		return err
	}
	return printKubectlQuota(ctx, c, out, "capacity")
}

// printKubectlQuota prints what `kubectl quota args...` prints.
func printKubectlQuota(ctx context.Context, c *localcluster.Cluster, out io.Writer, args ...string) error {
	var stdout, stderr bytes.Buffer
	cmd := cli.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	cmd.SetArgs(append(slices.Clone(args), "--kubeconfig", c.KubeconfigPath))
	if err := cmd.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("kubectl quota %s: %w (%s)", strings.Join(args, " "), err, stderr.String())
	}
	section(out, "$ kubectl quota "+strings.Join(args, " "))
	_, err := io.Copy(out, &stdout)
	return err
}

// clearSeedNamespaces deletes what the scenes before left in seed 000's
// namespaces: deployments and bare pods.
func clearSeedNamespaces(ctx context.Context, c *localcluster.Cluster) error {
	for _, ns := range seedNamespaces {
		if err := c.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the deployments of %s: %w", ns, err)
		}
		if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the pods of %s: %w", ns, err)
		}
	}
	return waitNoPods(ctx, c)
}

func createClaimTemplate(ctx context.Context, c *localcluster.Cluster, ns string) error {
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: gpuClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpuClaimsPerPod}}},
		}}}}
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, t, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaimTemplate %s/one-gpu: %w", ns, err)
	}
	return nil
}

// createGPUWorkload is a deployment of pods that each claim one GPU from the
// one-gpu template and tolerate the GPU machines' taint.
func createGPUWorkload(ctx context.Context, c *localcluster.Cluster, ns, name string, replicas int32) error {
	labels := map[string]string{"app": name}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations:    []corev1.Toleration{{Key: gpuTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
						Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests, Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitGPUPods waits until ns has running pods running and pending pods
// pending, and has held so for a few autoscaler loops.
func waitGPUPods(ctx context.Context, c *localcluster.Cluster, ns string, running, pending int) error {
	want := fmt.Sprintf("%d running, %d pending", running, pending)
	var got string
	var since time.Time
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := countPods(ctx, c, ns, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if err != nil {
			return false, err
		}
		p, err := countPods(ctx, c, ns, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending })
		if err != nil {
			return false, err
		}
		now := fmt.Sprintf("%d running, %d pending", r, p)
		if now != got {
			got, since = now, time.Now()
		}
		return got == want && time.Since(since) >= 5*time.Second, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s in %s (%s): %w", want, ns, got, err)
	}
	return nil
}

// latestEvent waits for an event of reason in ns whose message contains
// substr, and returns its message.
func latestEvent(ctx context.Context, c *localcluster.Cluster, ns, reason, substr string) (string, error) {
	var message string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, substr) {
				message = e.Message
			}
		}
		return message != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for a %s event in %s naming %s: %w", reason, ns, substr, err)
	}
	return message, nil
}
