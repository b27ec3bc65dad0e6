package e2e

import (
	"context"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The soak's gangs: a deployment of 2 to 4 pods that are one gang, by a
// Workload API PodGroup of the deployment's size or by ACK's labels, in turn.
// A deployment recreates a member that a drain or a reclaim took, as a
// training job's controller would, and keeps the gang's pods drainable.

// soakGang is a gang workload of the soak.
type soakGang struct {
	namespace string
	// podGroup is set when the pods name a PodGroup of the same name.
	podGroup bool
}

// createGang creates gang name in ns.
func (s *soak) createGang(ctx context.Context, ns, name, cpu, priorityClass string, nodeSelector map[string]string) {
	t := s.t
	size := 2 + s.rng.Intn(3)
	g := soakGang{namespace: ns, podGroup: s.counts.Gangs%2 == 0}
	s.counts.Gangs++
	member := withACKLabels(name, size)
	if g.podGroup {
		createGangPodGroup(t, ctx, ns, name, int32(size))
		member = inPodGroup(name)
	}
	createSoakDeployment(t, ctx, ns, name, int32(size), cpu, priorityClass, nodeSelector, member)
	s.gangs[name] = g
}

// deleteGang deletes a gang's deployment and PodGroup; the PodGroup goes
// once its pods are gone.
func (s *soak) deleteGang(ctx context.Context, name string) {
	g := s.gangs[name]
	delete(s.gangs, name)
	if err := cluster.Client.AppsV1().Deployments(g.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		s.t.Errorf("deleting gang deployment %s/%s: %v", g.namespace, name, err)
	}
	if !g.podGroup {
		return
	}
	err := cluster.Client.SchedulingV1beta1().PodGroups(g.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Errorf("deleting PodGroup %s/%s: %v", g.namespace, name, err)
	}
}

// dropWaitingGangs deletes the gangs with a pod not bound: a gang is
// dropped whole, never trimmed to its bound pods as a deployment is.
func (s *soak) dropWaitingGangs(ctx context.Context) {
	for _, name := range slices.Sorted(maps.Keys(s.gangs)) {
		ns := s.gangs[name].namespace
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			s.t.Errorf("listing the pods of gang %s/%s: %v", ns, name, err)
			continue
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName == "" {
				s.deleteGang(ctx, name)
				break
			}
		}
	}
}
