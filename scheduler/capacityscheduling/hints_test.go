package capacityscheduling

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestIsSchedulableAfterTreeChange(t *testing.T) {
	tree := func(uid string, generation int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetUID(k8stypes.UID("uid-" + uid))
		u.SetGeneration(generation)
		return u
	}
	typed := &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: metav1.ObjectMeta{UID: "uid-a", Generation: 1}}
	for _, tc := range []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"created", nil, tree("a", 1), fwk.Queue},
		{"deleted", tree("a", 1), nil, fwk.Queue},
		{"status written", tree("a", 1), tree("a", 1), fwk.QueueSkip},
		{"typed status written", typed, typed.DeepCopy(), fwk.QueueSkip},
		{"spec changed", tree("a", 1), tree("a", 2), fwk.Queue},
		{"recreated", tree("a", 1), tree("b", 1), fwk.Queue},
		{"not an object", "x", tree("a", 1), fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := isSchedulableAfterTreeChange(klog.Background(), nil, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
