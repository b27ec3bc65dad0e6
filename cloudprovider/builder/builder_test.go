package builder

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	restclient "k8s.io/client-go/rest"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// The names the registry builds are the names the options accept, so that no
// valid --cloud-provider fails late and no invalid one gets this far.
func TestAvailableCloudProvidersMatchValidation(t *testing.T) {
	if diff := cmp.Diff([]string{"clusterapi", "kwok"}, AvailableCloudProviders()); diff != "" {
		t.Errorf("AvailableCloudProviders() (-want +got):\n%s", diff)
	}
	for _, name := range AvailableCloudProviders() {
		opts := config.Defaults()
		opts.CloudProviderName = name
		if err := opts.Validate(); err != nil {
			t.Errorf("--cloud-provider=%s: Validate() = %v, want nil", name, err)
		}
	}
	if !strings.Contains(strings.Join(AvailableCloudProviders(), ","), config.Defaults().CloudProviderName) {
		t.Errorf("the default --cloud-provider %q is not built", config.Defaults().CloudProviderName)
	}
}

func TestNewCloudProviderRefusesUnknownName(t *testing.T) {
	opts := config.Defaults()
	opts.CloudProviderName = "gce"
	_, err := NewCloudProvider(context.Background(), opts, Cluster{})
	want := `--cloud-provider "gce" is not supported: use one of [clusterapi kwok]`
	if err == nil || err.Error() != want {
		t.Errorf("NewCloudProvider() = %v, want %q", err, want)
	}
}

func TestManagementConfig(t *testing.T) {
	workload := &restclient.Config{Host: "https://workload:6443", QPS: 20, Burst: 40}
	cluster := Cluster{Config: workload, UserAgent: "cluster-autoscaler"}
	kubeconfig := filepath.Join(t.TempDir(), "management.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "https://management:6443"}}]
contexts: [{name: m, context: {cluster: m, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: m
`), 0o600); err != nil {
		t.Fatal(err)
	}

	opts := config.Defaults()
	got, err := ManagementConfig(opts, cluster)
	if err != nil || got != workload {
		t.Errorf("without --cloud-config: ManagementConfig() = %v, %v; want the workload cluster's config", got, err)
	}

	opts.CloudConfig = kubeconfig
	got, err = ManagementConfig(opts, cluster)
	if err != nil {
		t.Fatalf("--cloud-config=%s: %v", kubeconfig, err)
	}
	type seen struct {
		Host      string
		QPS       float32
		Burst     int
		UserAgent bool
	}
	if diff := cmp.Diff(seen{"https://management:6443", 20, 40, true},
		seen{got.Host, got.QPS, got.Burst, strings.HasSuffix(got.UserAgent, "/cluster-autoscaler")}); diff != "" {
		t.Errorf("--cloud-config: management config (-want +got):\n%s", diff)
	}

	opts.CloudConfig = filepath.Join(t.TempDir(), "missing")
	if _, err := ManagementConfig(opts, cluster); err == nil || !strings.Contains(err.Error(), "the management cluster kubeconfig") {
		t.Errorf("--cloud-config naming no file: err = %v, want one naming the management cluster kubeconfig", err)
	}
}
