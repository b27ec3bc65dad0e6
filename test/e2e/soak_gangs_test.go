package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/quota/gang"
)

// The soak's gangs: a deployment of 2 to 4 pods that are one gang, by a
// Workload API PodGroup of the deployment's size or by ACK's labels, in turn.
// A deployment recreates a member that a drain or a reclaim took, as a
// training job's controller would, and keeps the gang's pods drainable.
// While gangs wait, the soak disturbs them: a member relabelled to another
// gang or out of any, a gang deleted with all its pods pending; when none
// waits, it creates one its tree refuses, which waits until dropped.

// soakGang is a gang workload of the soak.
type soakGang struct {
	namespace string
	// podGroup is set when the pods name a PodGroup of the same name.
	podGroup bool
	size     int
	// created is the operation that created it, to disturb the newest first.
	created int
}

// createGang creates gang name in ns.
func (s *soak) createGang(ctx context.Context, ns, name, cpu, priorityClass string, nodeSelector map[string]string) {
	s.addGang(ctx, ns, name, 2+s.rng.Intn(3), cpu, priorityClass, nodeSelector, s.counts.Gangs%2 == 0)
}

// addGang creates gang name in ns of size pods of cpu, by a PodGroup or by
// ACK's labels.
func (s *soak) addGang(ctx context.Context, ns, name string, size int, cpu, priorityClass string, nodeSelector map[string]string, podGroup bool) {
	t := s.t
	g := soakGang{namespace: ns, podGroup: podGroup, size: size, created: s.counts.Operations}
	s.counts.Gangs++
	member := withACKLabels(name, size)
	if g.podGroup {
		createGangPodGroup(t, ctx, ns, name, int32(size))
		member = inPodGroup(name)
	}
	createSoakDeployment(t, ctx, ns, name, int32(size), cpu, priorityClass, nodeSelector, member)
	s.gangs[name] = g
}

// createRefusedGang creates, in a namespace of the tree, a gang that waits
// for good: 4 pods of 3 cpu, over every leaf's max of 10. Its tree refuses
// it whatever else is charged, so no node may be added for it either.
func (s *soak) createRefusedGang(ctx context.Context, podGroup bool) {
	name := fmt.Sprintf("soak-%d-refused", s.counts.Operations)
	ns := s.namespaces[s.rng.Intn(4)]
	s.addGang(ctx, ns, name, 4, "3", "e2e-soak-low", map[string]string{"soak": "true"}, podGroup)
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
		for _, p := range s.gangPods(ctx, name) {
			if p.Spec.NodeName == "" {
				s.deleteGang(ctx, name)
				break
			}
		}
	}
}

// gangPods are the live pods of gang name's deployment, those relabelled
// out of the gang included.
func (s *soak) gangPods(ctx context.Context, name string) []corev1.Pod {
	ns := s.gangs[name].namespace
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		s.t.Errorf("listing the pods of gang %s/%s: %v", ns, name, err)
		return nil
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// newestGangs are the gangs' names, the newest first: the likeliest to
// wait still.
func (s *soak) newestGangs() []string {
	names := slices.Collect(maps.Keys(s.gangs))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.gangs[b].created, s.gangs[a].created), strings.Compare(a, b))
	})
	return names
}

// waitingMember is a pod not bound yet that is still labelled a member of
// its ACK gang, from the newest gang that has one.
func (s *soak) waitingMember(ctx context.Context) (string, *corev1.Pod, bool) {
	for _, name := range s.newestGangs() {
		if s.gangs[name].podGroup {
			continue // a pod's PodGroup is part of its spec, which does not change
		}
		for _, p := range s.gangPods(ctx, name) {
			if p.Spec.NodeName == "" && p.Labels[gang.LabelName] == name {
				return name, &p, true
			}
		}
	}
	return "", nil, false
}

// relabelMember moves a waiting member of an ACK gang to another gang of its
// namespace (a new one when there is none), with that gang's size, or with
// remove out of any gang. Its deployment keeps it, and its old gang, short
// of a member, waits until dropped; the gang it joins has a member past its
// size. With no member waiting it creates a gang that waits, and takes one
// of its pods; false when they did not come.
func (s *soak) relabelMember(ctx context.Context, remove bool) bool {
	var name string
	var pod *corev1.Pod
	if !s.findOrCreateWaiting(ctx, false, func() (ok bool) { name, pod, ok = s.waitingMember(ctx); return ok }) {
		return false
	}
	labels := map[string]any{gang.LabelName: nil}
	if !remove {
		to, size := s.otherGang(name)
		labels = map[string]any{gang.LabelName: to, gang.LabelMinAvailable: strconv.Itoa(size)}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		s.t.Fatal(err)
	}
	_, err = cluster.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false // gone meanwhile: a drain or a replica set's doing
	case err != nil:
		s.t.Errorf("relabelling pod %s/%s of gang %s: %v", pod.Namespace, pod.Name, name, err)
		return false
	case remove:
		s.counts.GangLabelsRemoved++
	default:
		s.counts.GangsRelabelled++
	}
	return true
}

// otherGang is an ACK gang of gang name's namespace other than it, and its
// size; or, when there is none, a new gang's name of the same size.
func (s *soak) otherGang(name string) (string, int) {
	g := s.gangs[name]
	for _, other := range s.newestGangs() {
		if o := s.gangs[other]; other != name && !o.podGroup && o.namespace == g.namespace {
			return other, o.size
		}
	}
	return name + "-moved", g.size
}

// deleteWaitingGang deletes the newest gang none of whose pods is bound,
// its pods along with its deployment. With no gang waiting it creates one
// that waits, and deletes it once its pods exist; false when they did not
// come.
func (s *soak) deleteWaitingGang(ctx context.Context) bool {
	var name string
	if !s.findOrCreateWaiting(ctx, s.counts.Gangs%2 == 0, func() (ok bool) { name, ok = s.waitingGang(ctx); return ok }) {
		return false
	}
	ns := s.gangs[name].namespace
	s.deleteGang(ctx, name)
	err := cluster.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		s.t.Errorf("deleting the pods of gang %s/%s: %v", ns, name, err)
	}
	s.counts.GangsDeleted++
	return true
}

// waitingGang is the newest gang with pods, none of them bound.
func (s *soak) waitingGang(ctx context.Context) (string, bool) {
	for _, name := range s.newestGangs() {
		pods := s.gangPods(ctx, name)
		if len(pods) > 0 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }) {
			return name, true
		}
	}
	return "", false
}

// findOrCreateWaiting runs find, and when it finds nothing creates a gang
// its tree refuses (by a PodGroup or ACK's labels) and runs find until its
// pods exist; false when they did not come in time.
func (s *soak) findOrCreateWaiting(ctx context.Context, podGroup bool, find func() bool) bool {
	if find() {
		return true
	}
	s.createRefusedGang(ctx, podGroup)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return find(), nil
	})
	return err == nil
}
