// Package cli is kubectl-quota's command line: cobra commands over kubectl's
// connection flags. It reads the cluster and hands typed objects to the report
// package, which does the explaining. It lives outside main so that tests run
// the very commands users run, in-process.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/pkg/version"
)

// Output formats of -o.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// options are the flags every command shares.
type options struct {
	config              *connection
	streams             genericiooptions.IOStreams
	output              string
	autoscalerNamespace string
	autoscalerStatus    string
	now                 func() time.Time
}

// NewRootCommand is `kubectl quota`. Its output goes to streams, so a test can
// run it in-process and read what a user would see.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{
		config:              &connection{},
		streams:             streams,
		output:              OutputTable,
		autoscalerNamespace: "kube-system",
		autoscalerStatus:    api.StatusConfigMapName,
		now:                 time.Now,
	}
	root := &cobra.Command{
		Use:   "kubectl-quota",
		Short: "Explain ElasticQuotaTree and CapacityQuota decisions from live objects",
		Long: `kubectl quota explains quota decisions from live objects:

  kubectl quota explain pod NAME -n NAMESPACE   why a pod is pending: what refused it, on which dimension, what raised the total
  kubectl quota explain podgroup NAME -n NS     the same for a gang: whether it is admitted whole, what it asks, what stops it
  kubectl quota tree                            the ElasticQuotaTree in force with used/min/max per quota node
  kubectl quota capacity                        the CapacityQuotas with used, upcoming nodes and headroom

Everything is computed with the same library the scheduler and the autoscaler use.
Answers are best-effort over what can be read; missing data is listed under NOTES.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			switch o.output {
			case OutputTable, OutputJSON, OutputYAML:
				return nil
			}
			return fmt.Errorf("--output %q is not one of table, json, yaml", o.output)
		},
	}
	// --version as well as the version subcommand, like the other binaries.
	root.Version = version.String()
	root.SetVersionTemplate("kubectl-quota {{.Version}}\n")
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.addFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", o.output, "Output format: table, json or yaml.")
	root.PersistentFlags().StringVar(&o.autoscalerNamespace, "autoscaler-namespace", o.autoscalerNamespace,
		"Namespace of the cluster autoscaler's status ConfigMap (its --namespace).")
	root.PersistentFlags().StringVar(&o.autoscalerStatus, "autoscaler-status-configmap", o.autoscalerStatus,
		"Name of the cluster autoscaler's status ConfigMap (its --status-config-map-name).")
	root.AddCommand(newExplainCommand(o), newTreeCommand(o), newCapacityCommand(o), newVersionCommand(o))
	return root
}

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl-quota",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(o.streams.Out, version.String())
			return err
		},
	}
}

// print writes v as JSON or YAML, or as a table with table.
func (o *options) print(v any, table func(io.Writer) error) error {
	switch o.output {
	case OutputJSON:
		// Refusals read "used 8 + 2 > limit 8": keep ">" readable.
		enc := json.NewEncoder(o.streams.Out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		return nil
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = o.streams.Out.Write(b)
		return err
	}
	return table(o.streams.Out)
}
