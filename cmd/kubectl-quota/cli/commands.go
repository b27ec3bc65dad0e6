package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotascale/quotascale/cmd/kubectl-quota/internal/report"
	"github.com/quotascale/quotascale/quota/elastic"
)

func newExplainCommand(o *options) *cobra.Command {
	top := report.DefaultTop
	cmd := &cobra.Command{
		Use:   "explain pod NAME",
		Short: "Explain why a pod is pending: what refused it, on which dimension, and what raised the total",
		Long: `Explain a pod's placement from live objects:

  - the verdict, in one line;
  - its ElasticQuotaTree leaf and every ancestor, per resource used/request/min/max/borrowed,
    the binding one marked, with the scheduler's words;
  - what raised the binding quota node's total: its bound pods by workload, largest first;
  - the node groups the autoscaler reports, whether each can host the pod and grow, and the
    CapacityQuotas on them with used, upcoming nodes and headroom;
  - the scheduler's and autoscaler's events for the pod, newest last.`,
		Example: `  kubectl quota explain pod nginx1-744b889544-zr5xz -n namespace1
  kubectl quota explain pod/test-capacityquota-workload-5d8c9-xyz12 -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := podName(args)
			if err != nil {
				return err
			}
			return o.explain(cmd, name, top)
		},
	}
	cmd.Flags().IntVar(&top, "top", top, "How many workloads to list under what raised the binding quota node's total.")
	return cmd
}

// podName accepts `pod NAME`, `pods NAME`, `po NAME`, `pod/NAME` and `NAME`.
func podName(args []string) (string, error) {
	kind, name := "pod", args[0]
	if len(args) == 2 {
		kind, name = args[0], args[1]
	} else if k, n, ok := strings.Cut(args[0], "/"); ok {
		kind, name = k, n
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
	default:
		return "", fmt.Errorf("only pods can be explained, not %q", kind)
	}
	if name == "" {
		return "", fmt.Errorf("a pod name is required")
	}
	return name, nil
}

func (o *options) explain(cmd *cobra.Command, name string, top int) error {
	ctx := cmd.Context()
	r, err := o.newReader()
	if err != nil {
		return err
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return err
	}
	r.trees(ctx, false)
	if elastic.InForce(r.snap.Trees) != nil {
		r.boundPods(ctx)
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
