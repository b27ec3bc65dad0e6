package elastic

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestInForce(t *testing.T) {
	tree := func(namespace, name string, age time.Duration) *schedulingv1beta1.ElasticQuotaTree {
		return &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))}}
	}
	older, newer := tree("kube-system", "b", 2*time.Hour), tree("kube-system", "a", time.Hour)
	elsewhere := tree("team", "oldest", 3*time.Hour)
	sameAgeA, sameAgeB := tree("kube-system", "a", time.Hour), tree("kube-system", "b", time.Hour)
	tests := []struct {
		name  string
		trees []*schedulingv1beta1.ElasticQuotaTree
		want  *schedulingv1beta1.ElasticQuotaTree
	}{
		{"none", nil, nil},
		{"only kube-system counts", trees(elsewhere), nil},
		{"the oldest in kube-system", trees(newer, elsewhere, nil, older), older},
		{"same age: by name", trees(sameAgeB, sameAgeA), sameAgeA},
	}
	for _, tt := range tests {
		if got := InForce(tt.trees); got != tt.want {
			t.Errorf("%s: InForce = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func trees(t ...*schedulingv1beta1.ElasticQuotaTree) []*schedulingv1beta1.ElasticQuotaTree { return t }
