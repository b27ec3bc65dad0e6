package report

import (
	"regexp"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/quota/elastic/elastictest"
)

// TestTreeAgreesWithTheSchedulerAndTheAutoscaler: `kubectl quota tree` over
// the cluster of elastictest finds the tree in force and the usage that the
// scheduler's plugin and the autoscaler's processor find
// (TestSchedulerAndAutoscalerAgreeOnTheTree): pods being deleted or marked for
// disruption count until they are gone, finished and unbound ones do not.
func TestTreeAgreesWithTheSchedulerAndTheAutoscaler(t *testing.T) {
	for _, step := range elastictest.Steps() {
		r := Tree(Snapshot{Now: now, Trees: step.Trees, Pods: step.Pods})
		if len(r.Trees) == 0 || !r.Trees[0].InForce || r.Trees[0].Tree != "kube-system/"+elastictest.TreeName {
			t.Fatalf("%s: no tree in force in %+v", step.Name, r.Trees)
		}
		got, err := reportedInForce(r.Trees[0])
		if err != nil {
			t.Fatalf("%s: %v", step.Name, err)
		}
		if diff := elastictest.Diff(step.Want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s\nnotes: %q", step.Name, diff, r.Trees[0].Notes)
		}
	}
}

var lastValidNote = regexp.MustCompile(`the quota nodes shown are generation (\d+)'s`)

// reportedInForce reads the generation in force and the figures off a view.
func reportedInForce(view TreeView) (elastictest.InForce, error) {
	out := elastictest.InForce{Generation: view.Generation, Nodes: map[string]elastictest.Node{}}
	for _, note := range view.Notes {
		if m := lastValidNote.FindStringSubmatch(note); m != nil {
			g, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return out, err
			}
			out.Generation = g
		}
	}
	for _, n := range view.Nodes {
		node := elastictest.Node{Used: corev1.ResourceList{}, Min: corev1.ResourceList{}, Max: corev1.ResourceList{}}
		for _, r := range n.Resources {
			for list, value := range map[*corev1.ResourceList]string{&node.Used: r.Used, &node.Min: r.Min, &node.Max: r.Max} {
				if value == Unlimited {
					continue
				}
				q, err := resource.ParseQuantity(value)
				if err != nil {
					return out, err
				}
				(*list)[corev1.ResourceName(r.Resource)] = q
			}
		}
		out.Nodes[n.Name] = node
	}
	return out, nil
}
