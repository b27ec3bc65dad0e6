package capacity

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func limits(pairs ...string) autoscalingv1beta1.ResourceList {
	out := autoscalingv1beta1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[autoscalingv1beta1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func coreList(pairs ...string) corev1.ResourceList {
	return ToCoreList(limits(pairs...))
}

func capacityQuota(name string, selector *metav1.LabelSelector, resources autoscalingv1beta1.ResourceList) *autoscalingv1beta1.CapacityQuota {
	q := &autoscalingv1beta1.CapacityQuota{Spec: autoscalingv1beta1.CapacityQuotaSpec{
		Selector: selector, Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: resources},
	}}
	q.Name = name
	return q
}

func matchLabels(pairs ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		s.MatchLabels[pairs[i]] = pairs[i+1]
	}
	return s
}

func node(name string, labels map[string]string, capacity corev1.ResourceList) *corev1.Node {
	n := &corev1.Node{Status: corev1.NodeStatus{Capacity: capacity}}
	n.Name, n.Labels = name, labels
	return n
}

// readQuotas decodes a multi-document YAML file of CapacityQuotas.
func readQuotas(t testing.TB, path string) []*autoscalingv1beta1.CapacityQuota {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*autoscalingv1beta1.CapacityQuota
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var q autoscalingv1beta1.CapacityQuota
		if err := yaml.UnmarshalStrict(doc, &q); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, &q)
	}
	return out
}
