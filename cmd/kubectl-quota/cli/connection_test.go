package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

const kubeconfig = `apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: dev, user: dev, namespace: team-a}
- name: prod
  context: {cluster: prod, user: dev}
clusters:
- name: dev
  cluster: {server: https://dev.example:6443}
- name: prod
  cluster: {server: https://prod.example:6443}
users:
- name: dev
  user: {token: dev-token}
`

// TestConnectionFlags: kubectl's connection flags reach the client's config
// and namespace as kubectl applies them over the kubeconfig.
func TestConnectionFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Host, Namespace, Token, As string
		Extra                      map[string][]string
		Groups                     []string
	}
	for _, tc := range []struct {
		name string
		args []string
		want result
	}{
		{"the kubeconfig's current context", nil,
			result{Host: "https://dev.example:6443", Namespace: "team-a", Token: "dev-token"}},
		{"another context, without a namespace", []string{"--context", "prod"},
			result{Host: "https://prod.example:6443", Namespace: "default", Token: "dev-token"}},
		{"overrides", []string{"-n", "team-b", "-s", "https://other.example", "--token", "t"},
			result{Host: "https://other.example", Namespace: "team-b", Token: "t"}},
		{"impersonation", []string{"--as", "jane", "--as-group", "g1", "--as-group", "g2",
			"--as-user-extra", "scopes=a", "--as-user-extra", "scopes=b", "--as-user-extra", "no-equals-sign"},
			result{Host: "https://dev.example:6443", Namespace: "team-a", Token: "dev-token", As: "jane",
				Groups: []string{"g1", "g2"}, Extra: map[string][]string{"scopes": {"a", "b"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &connection{}
			fs := pflag.NewFlagSet("kubectl-quota", pflag.ContinueOnError)
			c.addFlags(fs)
			if err := fs.Parse(append([]string{"--kubeconfig", path}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			loader := c.clientConfig()
			config, err := loader.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			namespace, _, err := loader.Namespace()
			if err != nil {
				t.Fatal(err)
			}
			got := result{Host: config.Host, Namespace: namespace, Token: config.BearerToken, As: config.Impersonate.UserName,
				Groups: config.Impersonate.Groups, Extra: config.Impersonate.Extra}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConnectionFlagNames: the flags are kubectl's, and kubectl has no
// basic-auth flags.
func TestConnectionFlagNames(t *testing.T) {
	fs := pflag.NewFlagSet("kubectl-quota", pflag.ContinueOnError)
	(&connection{}).addFlags(fs)
	var got []string
	fs.VisitAll(func(f *pflag.Flag) {
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + "," + name
		}
		got = append(got, name)
	})
	want := []string{
		"--as", "--as-group", "--as-uid", "--as-user-extra", "--certificate-authority", "--client-certificate",
		"--client-key", "--cluster", "--context", "--disable-compression", "--insecure-skip-tls-verify", "--kubeconfig",
		"-n,--namespace", "--proxy-url", "--request-timeout", "-s,--server", "--tls-server-name", "--token", "--user",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
}
