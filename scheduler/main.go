// Command kube-scheduler is the upstream kube-scheduler with Quotascale's
// CapacityScheduling plugin registered. Enable the plugin in a profile of its
// KubeSchedulerConfiguration (see docs/scheduler-config.yaml); every upstream flag
// and setting works as usual.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/quotascale/quotascale/scheduler/command"
)

func main() {
	os.Exit(cli.Run(command.New()))
}
