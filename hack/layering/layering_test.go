package layering

import (
	"bytes"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

const (
	module       = "github.com/quotascale/quotascale"
	root         = "../.."
	architecture = "docs/architecture.md"
	// kubectlQuotaDepsLimit bounds what kubectl-quota links: with the
	// autoscaler's, the scheduler's or kubectl's resource builders it is well
	// past a thousand packages; client-go's REST client and the API types are
	// some 340.
	kubectlQuotaDepsLimit = 400
)

// goList runs go list in the module root and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func rules(t *testing.T) []Rule {
	t.Helper()
	f, err := os.Open(filepath.Join(root, architecture))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := ParseRules(f)
	if err != nil {
		t.Fatalf("%s: %v", architecture, err)
	}
	return rules
}

// TestImportsFollowTheLayoutTable: every package of the module imports only
// what its row of docs/architecture.md's layout table allows.
func TestImportsFollowTheLayoutTable(t *testing.T) {
	rules := rules(t)
	// The rows the layering rests on must be there, or a table that lost
	// them would pass by covering nothing.
	for _, want := range []string{"apis/", "quota/", "cmd/kubectl-quota/", "cluster-autoscaler/", "scheduler/"} {
		if _, ok := ruleOf(module, rules, module+"/"+strings.TrimSuffix(want, "/")); !ok {
			t.Fatalf("%s has no row for %s", architecture, want)
		}
	}
	var packages []Package
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...") {
		fields := strings.Fields(line)
		packages = append(packages, Package{ImportPath: fields[0], Imports: fields[1:]})
	}
	if len(packages) < 20 {
		t.Fatalf("go list found %d packages; is the test running in the module?", len(packages))
	}
	for _, p := range Check(module, rules, packages) {
		t.Errorf("%s (fix the import, or the table of %s if the layout changed)", p, architecture)
	}
}

// TestKubectlQuotaLinksNoProgram: the plugin links neither the autoscaler, its
// processors and cloud providers, nor the scheduler, not even through another
// package; it reads the autoscaler's status through the format's leaf package.
func TestKubectlQuotaLinksNoProgram(t *testing.T) {
	forbidden := []string{
		module + "/cluster-autoscaler", module + "/processors", module + "/cloudprovider",
		module + "/scheduler", module + "/localcluster", "k8s.io/kubernetes",
	}
	allowed := []string{module + "/cluster-autoscaler/clusterstate/api"}
	deps := goList(t, "-deps", "./cmd/kubectl-quota")
	var linked []string
	for _, d := range deps {
		if hasPrefix(d, forbidden) && !hasPrefix(d, allowed) {
			linked = append(linked, d)
		}
	}
	if len(linked) > 0 {
		// The module's own packages first: they name the import to remove.
		slices.SortFunc(linked, func(a, b string) int {
			return cmp.Or(compareBool(!strings.HasPrefix(a, module), !strings.HasPrefix(b, module)), strings.Compare(a, b))
		})
		t.Errorf("kubectl-quota links %d packages it must not, among them:\n%s", len(linked), strings.Join(linked[:min(len(linked), 10)], "\n"))
	}
	if len(deps) >= kubectlQuotaDepsLimit {
		t.Errorf("kubectl-quota links %d packages, want fewer than %d (go list -deps ./cmd/kubectl-quota)", len(deps), kubectlQuotaDepsLimit)
	}
}

const table = "# Title\n\n## Layout (what lives where)\n\n" +
	"| path | owns | may import |\n| --- | --- | --- |\n" +
	"| `apis/<group>/<version>/` | types | `k8s.io/apimachinery` |\n" +
	"| `quota/` | arithmetic | `apis/`, `k8s.io/api`, `k8s.io/apimachinery` |\n" +
	"| `cluster-autoscaler/` | the loop | `quota/`, any library |\n" +
	"| `cloudprovider/` | providers | `cluster-autoscaler/config`, `k8s.io/client-go` |\n" +
	"| `test/` | tests | anything |\n" +
	"| `docs/` | documents | |\n\n" +
	"## Next\n\n| path | may import |\n| --- | --- |\n| `other/` | anything |\n"

func TestParseRules(t *testing.T) {
	got, err := ParseRules(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Path: "apis/", Libraries: []string{"k8s.io/apimachinery"}},
		{Path: "quota/", Folders: []string{"apis/"}, Libraries: []string{"k8s.io/api", "k8s.io/apimachinery"}},
		{Path: "cluster-autoscaler/", Folders: []string{"quota/"}, AnyLibrary: true},
		{Path: "cloudprovider/", Folders: []string{"cluster-autoscaler/config/"}, Libraries: []string{"k8s.io/client-go"}},
		{Path: "test/", Anything: true},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if _, err := ParseRules(strings.NewReader("# no table\n")); err == nil {
		t.Error("a document without the table parsed")
	}
}

// TestCheck plants forbidden imports and checks that each is reported.
func TestCheck(t *testing.T) {
	rules, err := ParseRules(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	m := "example.com/m"
	packages := []Package{
		{ImportPath: m + "/apis/v1", Imports: []string{"fmt", "k8s.io/apimachinery/pkg/runtime", "k8s.io/api/core/v1"}},
		{ImportPath: m + "/quota/tree", Imports: []string{m + "/apis/v1", m + "/quota/resources", "k8s.io/apiserver/pkg/server", m + "/cluster-autoscaler/core"}},
		{ImportPath: m + "/cluster-autoscaler/core", Imports: []string{m + "/quota/tree", "github.com/any/lib", m + "/test/e2e", m + "/tools/x"}},
		{ImportPath: m + "/test/e2e", Imports: []string{m + "/cluster-autoscaler/core", "anything.io/x"}},
		{ImportPath: m + "/tools/x"},
		{ImportPath: m + "/cloudprovider/kwok", Imports: []string{m + "/cluster-autoscaler/config", m + "/cluster-autoscaler/configs", m + "/cluster-autoscaler/core"}},
	}
	want := []string{
		m + "/apis/v1 (row apis/) imports k8s.io/api/core/v1: a library its row does not list",
		m + "/cloudprovider/kwok (row cloudprovider/) imports " + m + "/cluster-autoscaler/configs: its row does not list cluster-autoscaler/ or a folder holding it",
		m + "/cloudprovider/kwok (row cloudprovider/) imports " + m + "/cluster-autoscaler/core: its row does not list cluster-autoscaler/ or a folder holding it",
		m + "/cluster-autoscaler/core (row cluster-autoscaler/) imports " + m + "/test/e2e: its row does not list test/ or a folder holding it",
		m + "/cluster-autoscaler/core (row cluster-autoscaler/) imports " + m + "/tools/x: a package in no row",
		m + "/quota/tree (row quota/) imports " + m + "/cluster-autoscaler/core: its row does not list cluster-autoscaler/ or a folder holding it",
		m + "/quota/tree (row quota/) imports k8s.io/apiserver/pkg/server: a library its row does not list",
		m + "/tools/x: in no row of the layout table",
	}
	if diff := gocmp.Diff(want, Check(m, rules, packages)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
