package elastic

import (
	"errors"
	"os"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{5,}`)

// FuzzBuildTree feeds arbitrary ElasticQuotaTree documents through Build and,
// when they are valid, through every operation, looking for panics and for
// error reports that are empty or unstable.
func FuzzBuildTree(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed-tree.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"spec":{"root":{"name":"root","min":{"cpu":"1"},"max":{"cpu":"2"},"namespaces":["a","a"],"children":[{"name":""}]}}}`))
	f.Add([]byte(`{"spec":{"root":{"name":"r","attributes":{"resourceflavors":"spot"},"children":[{"name":"x","namespaces":["x"],"min":{"memory":"-1"}}]}}}`))
	f.Add([]byte(`spec: {root: {name: r, min: {cpu: 1e3}, max: {cpu: 1k}, children: [{name: c, namespaces: [ns], max: {nvidia.com/gpu: 9223372036854775807}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if hugeExponent.Match(data) {
			// apimachinery's ParseQuantity takes seconds on exponents such
			// as 1e-99999999 before Build is ever called; that cost is the
			// decoder's, not this package's.
			return
		}
		var spec schedulingv1beta1.ElasticQuotaTree
		if yaml.Unmarshal(data, &spec) != nil {
			return
		}
		tree, err := Build(&spec)
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 || verr.Message() == "" {
				t.Fatalf("Build error without problems: %v", err)
			}
			if _, again := Build(&spec); again.Error() != err.Error() {
				t.Fatalf("unstable error:\n%v\n%v", err, again)
			}
			return
		}
		_ = tree.Status()
		namespaces := []string{"outside"}
		for _, n := range tree.Nodes() {
			namespaces = append(namespaces, n.Namespaces()...)
		}
		var candidates []Candidate
		for i, ns := range namespaces {
			uid := types.UID(ns + "-pod")
			request := cpu("1")
			if i%2 == 0 {
				request = list("cpu", "100m", "memory", "1Gi", "nvidia.com/gpu", "1")
			}
			if v := tree.Admit(ns, request); v.Admitted() {
				tree.AddRequests(uid, ns, request)
			} else if v.Message() == "" || v.Reason() == "" {
				t.Fatalf("refusal without explanation for %s", ns)
			}
			candidates = append(candidates, Candidate{UID: uid})
		}
		for _, ns := range namespaces {
			if plan, ok := tree.PlanReclaim(Preemptor{Namespace: ns, Requests: cpu("3"), Priority: 1}, candidates); ok {
				for _, uid := range plan.Victims {
					tree.RemovePod(uid)
				}
			}
		}
		if _, err := tree.Rebuild(&spec); err != nil {
			t.Fatalf("Rebuild of a spec that built: %v", err)
		}
	})
}
