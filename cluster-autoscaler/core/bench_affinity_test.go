package core

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
)

// BenchmarkRunOnceAntiAffinity is BenchmarkRunOnce at P3's size with every
// pending pod under required anti-affinity on kubernetes.io/hostname against
// the pods of its own deployment: the estimate then tracks each placement in
// every such pod's PreFilter state, and opens one node per pod.
func BenchmarkRunOnceAntiAffinity(b *testing.B) {
	sizes := []loopSize{{1000, 30, 100, 500}}
	if largeLoops() {
		sizes = append(sizes, loopSize{5000, 30, 500, 2500})
	}
	// fastpath is upstream's --enable-inter-pod-affinity-hostname-fast-path
	// (off by default): hostname-scoped terms are then checked per node in
	// Filter rather than against every bound pod in PreFilter.
	for _, size := range sizes {
		for _, fastPath := range []bool{false, true} {
			benchAntiAffinity(b, size, fastPath)
		}
	}
}

func benchAntiAffinity(b *testing.B, size loopSize, fastPath bool) {
	b.Run(fmt.Sprintf("%v/fastpath=%v", size, fastPath), func(b *testing.B) {
		featuregatetesting.SetFeatureGateDuringTest(b, utilfeature.DefaultFeatureGate, features.InterPodAffinityHostnameFastPath, fastPath)
		f := newLoopFixture(size.nodes, size.podsPerNode, size.groups, size.pending)
		pods, err := f.pods.List(labels.Everything())
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				continue
			}
			app := metav1.GetControllerOf(p).Name
			p.Labels = map[string]string{"app": app}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
					TopologyKey:   corev1.LabelHostname,
				}}}}
		}
		benchLoops(b, f)
	})
}
