package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	workloadv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotascale/quotascale/quota/gang"
)

// podGroupsResource is the Workload API's PodGroup, served where the
// GenericWorkload feature gate is on.
var podGroupsResource = workloadv1beta1.SchemeGroupVersion.WithResource("podgroups")

// gang reads what explaining a pod of a gang needs: the PodGroup the pod
// names, if any, and the pods of its namespace that may be the gang's.
func (r *reader) gang(ctx context.Context, pod *corev1.Pod) {
	key, ok := gang.RefOf(pod)
	if !ok {
		return
	}
	if key.Kind == gang.KindPodGroup {
		pg, err := r.podGroup(ctx, key.Namespace, key.Name)
		if err != nil {
			r.unreadable("reading PodGroup "+key.String(), podGroupsResource, err)
		}
		r.snap.PodGroup = pg
	}
	r.gangPods(ctx, key)
}

// podGroup reads a PodGroup; nil with no error when it does not exist.
func (r *reader) podGroup(ctx context.Context, namespace, name string) (*workloadv1beta1.PodGroup, error) {
	u, err := r.dyn.Resource(podGroupsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && u == nil {
		// Either the PodGroup or the whole API is missing; a list tells which.
		if _, listErr := r.dyn.Resource(podGroupsResource).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: 1}); listErr != nil {
			return nil, listErr
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pg := &workloadv1beta1.PodGroup{}
	if err := fromUnstructured(u, pg); err != nil {
		return nil, err
	}
	return pg, nil
}

// gangPods lists the pods of the gang's namespace that may belong to it:
// those with ACK's name label, or, for a PodGroup, which no selector picks
// out, all of them.
func (r *reader) gangPods(ctx context.Context, key gang.Key) {
	opts := metav1.ListOptions{}
	if key.Kind == gang.KindLabels {
		opts.LabelSelector = labels.Set{gang.LabelName: key.Name}.String()
	}
	list, err := r.dyn.Resource(podsResource).Namespace(key.Namespace).List(ctx, opts)
	if err != nil {
		r.unreadable(fmt.Sprintf("listing the pods of gang %s", key), schema.GroupVersionResource{}, err)
		return
	}
	r.snap.GangPods = convertAll[corev1.Pod](r, list)
}
