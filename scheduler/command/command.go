// Package command is Quotascale's kube-scheduler command: the upstream command
// with the CapacityScheduling plugin registered. The binary runs it and the
// flags reference (docs/flags.md) is generated from it.
package command

import (
	"github.com/spf13/cobra"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// New returns the kube-scheduler command.
func New() *cobra.Command {
	return app.NewSchedulerCommand(app.WithPlugin(capacityscheduling.Name, capacityscheduling.New))
}
