package capacity

import (
	"os"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{5,}`)

// FuzzBuildCapacitySet feeds arbitrary CapacityQuotaLists through Build and
// the usage operations, looking for panics and for status that contradicts
// itself.
func FuzzBuildCapacitySet(f *testing.F) {
	for _, path := range []string{"testdata/quota.yaml", "testdata/more-quotas.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`items: [{metadata: {name: a}, spec: {selector: {matchExpressions: [{key: pool, operator: In}]}, limits: {resources: {cpu: 500m}}}}]`))
	f.Add([]byte(`items: [{metadata: {name: b}, spec: {selector: {matchLabels: {node.kubernetes.io/instance-type: x}}, limits: {resources: {nodes: 1, memory: 1Ei}}}}]`))
	f.Add([]byte(`items: [{metadata: {name: c}, spec: {limits: {resources: {gpu.example.com.deviceclass.resource.k8s.io/devices: 4, A_B.deviceclass.resource.k8s.io/devices: 1, .deviceclass.resource.k8s.io/devices: 2}}}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if hugeExponent.Match(data) {
			// apimachinery's ParseQuantity takes seconds on exponents such
			// as 1e-99999999, inside the decoder, before Build is called.
			return
		}
		var list autoscalingv1beta1.CapacityQuotaList
		if yaml.Unmarshal(data, &list) != nil {
			var single autoscalingv1beta1.CapacityQuota
			if yaml.Unmarshal(data, &single) != nil {
				return
			}
			list.Items = append(list.Items, single)
		}
		quotas := make([]*autoscalingv1beta1.CapacityQuota, 0, len(list.Items))
		for i := range list.Items {
			quotas = append(quotas, &list.Items[i])
		}
		set := Build(quotas, Options{})
		labelSets := []map[string]string{nil, {"cloud.google.com/compute-class": "test-capacityquota-class"}, {"pool": "a", "zone": "b"}}
		for _, q := range quotas {
			if q.Spec.Selector != nil {
				labelSets = append(labelSets, q.Spec.Selector.MatchLabels)
			}
		}
		capacity := coreList("cpu", "1930m", "memory", "8Gi", "nvidia.com/gpu", "1")
		for i, l := range labelSets {
			n := node(string(rune('a'+i%26)), l, capacity)
			set.AddNode(n)
			set.SetUpcoming("g", i, n)
			if k, exceeded := set.AllowedDelta(n, 3); k < 0 || k > 3 || (k < 3) != (len(exceeded) > 0) {
				t.Fatalf("AllowedDelta = %d, %+v", k, exceeded)
			}
		}
		for _, s := range set.Status() {
			if s.Valid != (s.Message == autoscalingv1beta1.ValidMessage) || s.Message == "" {
				t.Fatalf("status %+v contradicts itself", s)
			}
		}
		set.Rebuild(quotas, Options{ForbiddenSelectorKeys: []string{}})
		_ = set.MatchingQuotas(&corev1.Node{})
	})
}
