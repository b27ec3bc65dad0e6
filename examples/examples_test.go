package examples

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestExamplesMatchAcceptanceData keeps the demo's manifests identical to the ones
// the acceptance tests apply.
func TestExamplesMatchAcceptanceData(t *testing.T) {
	testdata := filepath.Join("..", "test", "e2e", "testdata")
	read := func(parts ...string) []byte {
		b, err := os.ReadFile(filepath.Join(append([]string{testdata}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(ElasticQuotaTree, read("elastic-quota-tree", "tree.yaml")) {
		t.Error("elasticquotatree.yaml differs from test/e2e/testdata/elastic-quota-tree/tree.yaml")
	}
	workloads, err := SeedWorkloads()
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range workloads {
		name := fmt.Sprintf("nginx%d.yaml", i+1)
		if !bytes.Equal(w, read("elastic-quota-tree", name)) {
			t.Errorf("%s differs from test/e2e/testdata/elastic-quota-tree/%s", name, name)
		}
	}
	if !bytes.Equal(CapacityQuotaWorkload, read("capacity-quota", "workload.yaml")) {
		t.Error("capacityquota-workload.yaml differs from test/e2e/testdata/capacity-quota/workload.yaml")
	}
	quotas := bytes.Join([][]byte{read("capacity-quota", "quota.yaml"), read("capacity-quota", "more-quotas.yaml")}, []byte("---\n"))
	if !bytes.Equal(CapacityQuotas, quotas) {
		t.Error("capacityquotas.yaml differs from quota.yaml + more-quotas.yaml in test/e2e/testdata/capacity-quota")
	}
}
