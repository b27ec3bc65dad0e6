package cli

import (
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

// connection is kubectl's connection flags (--kubeconfig, --context,
// --namespace, the credential and TLS overrides), bound with client-go's own
// clientcmd. cli-runtime's ConfigFlags would add its resource builders and
// printers, several hundred packages the plugin never runs.
type connection struct {
	kubeconfig string
	// userExtra holds --as-user-extra, KEY=VALUE, repeatable.
	userExtra []string
	overrides clientcmd.ConfigOverrides
}

func (c *connection) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, clientcmd.RecommendedConfigPathFlag, "",
		"Path to the kubeconfig file; by default $KUBECONFIG, then ~/.kube/config, as kubectl.")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	// kubectl has no basic-auth flags, and spells --server -s.
	names.AuthOverrideFlags.Username.LongName = ""
	names.AuthOverrideFlags.Password.LongName = ""
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&c.overrides, fs, names)
	fs.StringArrayVar(&c.userExtra, "as-user-extra", nil,
		"Extra user information to impersonate, as KEY=VALUE; repeat it for several values or keys.")
}

// clientConfig loads the kubeconfig as kubectl does, with the flags over it.
func (c *connection) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	rules.ExplicitPath = c.kubeconfig
	overrides := c.overrides
	overrides.ClusterDefaults = clientcmd.ClusterDefaults
	if len(c.userExtra) > 0 {
		overrides.AuthInfo.ImpersonateUserExtra = map[string][]string{}
		for _, kv := range c.userExtra {
			// kubectl skips an entry without "=" rather than failing.
			if key, value, ok := strings.Cut(kv, "="); ok {
				overrides.AuthInfo.ImpersonateUserExtra[key] = append(overrides.AuthInfo.ImpersonateUserExtra[key], value)
			}
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
}
