package app

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// newFramework is the scheduling simulation scale-up and scale-down run: the
// scheduler's own plugins, CapacityScheduling among them, on the cluster's
// informers.
func newFramework(ctx context.Context, opts config.Options, c *clients) (*simulator.Framework, error) {
	schedulerConfig, err := simulationConfig(opts)
	if err != nil {
		return nil, err
	}
	return simulator.NewFramework(ctx, simulator.FrameworkOptions{
		Config: schedulerConfig, Client: c.client, KubeConfig: c.config, Informers: c.factory,
		Registry:     frameworkruntime.Registry{capacityscheduling.Name: capacityscheduling.New},
		CSINodeAware: opts.CSINodeAwareScheduling, LogOffset: opts.SchedulerLogOffset,
	})
}

// simulationConfig is the scheduler configuration the scale-up simulation runs:
// --scheduler-config-file, or upstream's default profile plus, when elastic
// quota is on, one profile with CapacityScheduling for each scheduler of
// --elastic-quota-scheduler-names (default-scheduler's own profile when it is
// one of them), so that a quota pod's ResourceFlavor steers the simulation to
// the node groups it may use while other pods are simulated as the stock
// scheduler places them. The plugin reports nothing from here: the scheduler
// owns tree status and events.
func simulationConfig(opts config.Options) (*schedulerapi.KubeSchedulerConfiguration, error) {
	if opts.SchedulerConfigFile != "" || !opts.ElasticQuotaEnabled {
		return simulator.LoadSchedulerConfig(opts.SchedulerConfigFile)
	}
	quota := func(name string) configv1.KubeSchedulerProfile {
		return configv1.KubeSchedulerProfile{
			SchedulerName: ptr.To(name),
			Plugins: &configv1.Plugins{
				MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: capacityscheduling.Name}}},
			},
			PluginConfig: []configv1.PluginConfig{{
				Name: capacityscheduling.Name,
				Args: runtime.RawExtension{Raw: []byte(`{"writeStatus":false}`)},
			}},
		}
	}
	profiles := []configv1.KubeSchedulerProfile{{SchedulerName: ptr.To(corev1.DefaultSchedulerName)}}
	for _, name := range opts.ElasticQuotaSchedulerNames {
		if name == corev1.DefaultSchedulerName {
			profiles[0] = quota(name)
			continue
		}
		profiles = append(profiles, quota(name))
	}
	return simulator.DefaultSchedulerConfig(&configv1.KubeSchedulerConfiguration{Profiles: profiles})
}
