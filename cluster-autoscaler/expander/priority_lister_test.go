package expander

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestPriorityConfigFromLister(t *testing.T) {
	const ns = "quotascale-system"
	configMap := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	}
	type result struct {
		Data  string
		Found bool
	}
	tests := []struct {
		name    string
		objects []*corev1.ConfigMap
		want    result
	}{
		{name: "present", objects: []*corev1.ConfigMap{configMap(PriorityConfigMapName, map[string]string{PriorityConfigMapKey: "10: [a]"})}, want: result{"10: [a]", true}},
		{name: "present but empty", objects: []*corev1.ConfigMap{configMap(PriorityConfigMapName, map[string]string{PriorityConfigMapKey: ""})}, want: result{"", true}},
		{name: "no ConfigMap", objects: []*corev1.ConfigMap{configMap("something-else", map[string]string{PriorityConfigMapKey: "10: [a]"})}, want: result{"", false}},
		{name: "wrong key, as in upstream's common mistake", objects: []*corev1.ConfigMap{configMap(PriorityConfigMapName, map[string]string{"priority": "10: [a]"})}, want: result{"", false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, cm := range tc.objects {
				if err := indexer.Add(cm); err != nil {
					t.Fatal(err)
				}
			}
			data, found, err := PriorityConfigFromLister(corelisters.NewConfigMapLister(indexer).ConfigMaps(ns))()
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			if diff := cmp.Diff(tc.want, result{data, found}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

type failingLister struct{ err error }

func (l failingLister) List(labels.Selector) ([]*corev1.ConfigMap, error) { return nil, l.err }
func (l failingLister) Get(string) (*corev1.ConfigMap, error)             { return nil, l.err }

func TestPriorityConfigFromListerError(t *testing.T) {
	boom := errors.New("boom")
	_, found, err := PriorityConfigFromLister(failingLister{err: boom})()
	if !errors.Is(err, boom) || found || !strings.Contains(err.Error(), PriorityConfigMapName) {
		t.Errorf("got found=%v err=%v, want a wrapped %v naming the ConfigMap", found, err, boom)
	}
}
