// Command kube-scheduler is the upstream kube-scheduler with Quotascale's
// CapacityScheduling plugin registered. Enable the plugin in a profile of its
// KubeSchedulerConfiguration (see docs/scheduler-config.yaml); every upstream flag
// and setting works as usual.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(capacityscheduling.Name, capacityscheduling.New))
	os.Exit(cli.Run(command))
}
