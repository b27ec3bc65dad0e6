package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotascale/quotascale/cmd/kubectl-quota/internal/report"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
)

func newExplainCommand(o *options) *cobra.Command {
	top := report.DefaultTop
	cmd := &cobra.Command{
		Use:   "explain (pod|podgroup) NAME",
		Short: "Explain why a pod, or a gang, is pending: what refused it, on which dimension, and what raised the total",
		Long: `Explain a pod's placement from live objects:

  - the verdict, in one line;
  - for a pod of a gang (a Workload API PodGroup, or ACK's gang labels): the gang, its pods,
    whether it is whole, and what the whole gang asks of its quota;
  - its ElasticQuotaTree leaf and every ancestor, per resource used/request/min/max/borrowed,
    the binding one marked, with the scheduler's words; for a gang not yet whole the request
    is the gang's, which the tree admits whole or not at all;
  - what raised the binding quota node's total: its bound pods by workload, largest first;
  - the node groups the autoscaler reports, whether each can host the pod and grow, and the
    CapacityQuotas on them with used, upcoming nodes and headroom;
  - the scheduler's and autoscaler's events for the pod, newest last.

podgroup/NAME explains a PodGroup through its first pod that is not bound.`,
		Example: `  kubectl quota explain pod nginx1-744b889544-zr5xz -n namespace1
  kubectl quota explain pod/test-capacityquota-workload-5d8c9-xyz12 -o yaml
  kubectl quota explain podgroup/trainer -n team-a`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := explainTarget(args)
			if err != nil {
				return err
			}
			if kind == targetPodGroup {
				return o.explainPodGroup(cmd, name, top)
			}
			return o.explain(cmd, name, top)
		},
	}
	cmd.Flags().IntVar(&top, "top", top, "How many workloads to list under what raised the binding quota node's total.")
	return cmd
}

const (
	targetPod      = "pod"
	targetPodGroup = "podgroup"
)

// explainTarget accepts `pod NAME`, `pods NAME`, `po NAME`, `pod/NAME` and
// `NAME` for a pod, and `podgroup NAME`, `podgroups NAME`, `podgroup/NAME`
// for a PodGroup.
func explainTarget(args []string) (kind, name string, err error) {
	kind, name = targetPod, args[0]
	if len(args) == 2 {
		kind, name = args[0], args[1]
	} else if k, n, ok := strings.Cut(args[0], "/"); ok {
		kind, name = k, n
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		kind = targetPod
	case "podgroup", "podgroups", "podgroup.scheduling.k8s.io", "podgroups.scheduling.k8s.io":
		kind = targetPodGroup
	default:
		return "", "", fmt.Errorf("only pods and podgroups can be explained, not %q", kind)
	}
	if name == "" {
		return "", "", fmt.Errorf("a %s name is required", kind)
	}
	return kind, name, nil
}

func (o *options) explain(cmd *cobra.Command, name string, top int) error {
	r, err := o.newReader()
	if err != nil {
		return err
	}
	pod, err := r.pod(cmd.Context(), name)
	if err != nil {
		return err
	}
	r.gang(cmd.Context(), pod)
	return o.explainPod(cmd, r, pod, top)
}

// explainPodGroup explains a PodGroup through the pod of it the scheduler
// tries next (report.PodGroupPod).
func (o *options) explainPodGroup(cmd *cobra.Command, name string, top int) error {
	ctx := cmd.Context()
	r, err := o.newReader()
	if err != nil {
		return err
	}
	pg, err := r.podGroup(ctx, r.namespace, name)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("PodGroup %s/%s: the %s API is not served (the GenericWorkload feature gate is off)", r.namespace, name, podGroupsResource.GroupResource())
	}
	if err != nil {
		return fmt.Errorf("reading PodGroup %s/%s: %w", r.namespace, name, err)
	}
	if pg == nil {
		return fmt.Errorf("PodGroup %s/%s not found", r.namespace, name)
	}
	r.snap.PodGroup = pg
	r.gangPods(ctx, gang.Key{Kind: gang.KindPodGroup, Namespace: pg.Namespace, Name: pg.Name})
	pod := report.PodGroupPod(r.snap, pg.Namespace, pg.Name)
	if pod == nil {
		e := report.ExplainEmptyPodGroup(r.snap, pg)
		return o.print(e, func(w io.Writer) error { return report.PrintExplain(w, e, r.snap.Now) })
	}
	return o.explainPod(cmd, r, pod, top)
}

func (o *options) explainPod(cmd *cobra.Command, r *reader, pod *corev1.Pod, top int) error {
	ctx := cmd.Context()
	r.trees(ctx, false)
	if elastic.InForce(r.snap.Trees) != nil {
		r.boundPods(ctx)
		r.claims(ctx)
	}
	if pod.Spec.NodeName == "" {
		r.nodes(ctx)
		r.quotas(ctx)
		r.autoscaler(ctx, o.autoscalerNamespace, o.autoscalerStatus)
	}
	r.podEvents(ctx, pod)
	e := report.Explain(r.snap, pod, top)
	return o.print(e, func(w io.Writer) error { return report.PrintExplain(w, e, r.snap.Now) })
}

func newTreeCommand(o *options) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Show the ElasticQuotaTree in force with used/min/max and borrowed per quota node",
		Long: `Show the ElasticQuotaTree in force (the oldest in kube-system) as an indented table:
per quota node its namespaces, used/min/max per resource and what it borrows, with the
tree's Valid and Active conditions. Figures are the scheduler's status.quotas when they
describe the current generation, else summed from the bound pods.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := o.newReader()
			if err != nil {
				return err
			}
			r.trees(cmd.Context(), all)
			if elastic.InForce(r.snap.Trees) != nil {
				r.boundPods(cmd.Context())
				r.claims(cmd.Context())
			}
			t := report.Tree(r.snap)
			return o.print(t, func(w io.Writer) error { return report.PrintTree(w, t) })
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "Also list the trees outside kube-system, which are not in force.")
	return cmd
}

func newCapacityCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "capacity",
		Short: "Show the CapacityQuotas with used, upcoming nodes, limit and headroom",
		Long: `Show every CapacityQuota with, per limited resource, what the autoscaler counts against it:
used by the registered nodes, upcoming (nodes asked for and not registered yet, from the
autoscaler's status ConfigMap, shaped like a registered node of their group), the limit
and the headroom left (limit - used - upcoming), with the quota's validity.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := o.newReader()
			if err != nil {
				return err
			}
			r.quotas(cmd.Context())
			r.nodes(cmd.Context())
			r.autoscaler(cmd.Context(), o.autoscalerNamespace, o.autoscalerStatus)
			c := report.Capacity(r.snap)
			return o.print(c, func(w io.Writer) error { return report.PrintCapacity(w, c) })
		},
	}
}
