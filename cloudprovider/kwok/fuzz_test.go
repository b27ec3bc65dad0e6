package kwok

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"
)

// FuzzParseConfig feeds arbitrary documents to the parser: it must never panic,
// and a config it accepts must survive a round trip through YAML unchanged and
// still be valid.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(`{"nodeGroups":[{"name":"a","maxSize":1,"capacity":{"cpu":"1","memory":"1Gi"}}]}`))
	f.Add([]byte("nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: 1e3, memory: 1Ei}, allocatable: {cpu: 999.9}}]"))
	f.Add([]byte("nodeGroups: [{name: a, maxSize: 2, capacity: {cpu: \"1\", memory: 1Gi}, failures: {errorCode: X, failAfter: 0}}]"))
	f.Add([]byte("nodeGroups: [{name: a, taints: [{key: k, effect: NoExecute}], provisioningDelay: 1h}]"))
	f.Add([]byte("nodeGroups: null"))
	f.Add([]byte("- 1\n- 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshalling an accepted config: %v", err)
		}
		again, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("an accepted config is refused after a round trip: %v\n%s", err, out)
		}
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the config (-before +after):\n%s", diff)
		}
	})
}
