package cli

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cmd/kubectl-quota/internal/report"
)

var (
	treesResource  = schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")
	quotasResource = autoscalingv1beta1.SchemeGroupVersion.WithResource("capacityquotas")
	// The built-in kinds are read through the dynamic client too: the typed
	// clientset would link every API group's client and apply configurations.
	podsResource       = corev1.SchemeGroupVersion.WithResource("pods")
	nodesResource      = corev1.SchemeGroupVersion.WithResource("nodes")
	configMapsResource = corev1.SchemeGroupVersion.WithResource("configmaps")
	eventsResource     = corev1.SchemeGroupVersion.WithResource("events")
)

// statusTimeLayout is how the autoscaler writes the status document's time.
const statusTimeLayout = api.StatusTimeLayout

// reader fills a report.Snapshot. A piece it cannot read becomes a note, not an
// error: an explanation over what is readable beats none.
type reader struct {
	dyn       dynamic.Interface
	namespace string
	snap      report.Snapshot
}

func (o *options) newReader() (*reader, error) {
	loader := o.config.clientConfig()
	config, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return &reader{dyn: dyn, namespace: namespace, snap: report.Snapshot{Now: o.now()}}, nil
}

func (r *reader) note(format string, args ...any) {
	r.snap.Notes = append(r.snap.Notes, fmt.Sprintf(format, args...))
}

// unreadable turns a read error into a note naming what was not read.
func (r *reader) unreadable(what string, gvr schema.GroupVersionResource, err error) {
	switch {
	case apierrors.IsNotFound(err) && gvr.Resource != "":
		r.note("%s: the %s API is not installed", what, gvr.GroupResource())
	case apierrors.IsForbidden(err):
		r.note("%s: forbidden: %v", what, err)
	default:
		r.note("%s: %v", what, err)
	}
}

// pod reads the pod to explain, from the reader's namespace.
func (r *reader) pod(ctx context.Context, name string) (*corev1.Pod, error) {
	u, err := r.dyn.Resource(podsResource).Namespace(r.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s/%s not found", r.namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", r.namespace, name, err)
	}
	pod := &corev1.Pod{}
	if err := fromUnstructured(u, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// trees reads the ElasticQuotaTrees of kube-system, or of every namespace.
func (r *reader) trees(ctx context.Context, all bool) {
	namespace := schedulingv1beta1.EnforcedNamespace
	if all {
		namespace = metav1.NamespaceAll
	}
	list, err := r.dyn.Resource(treesResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.unreadable("listing ElasticQuotaTrees", treesResource, err)
		return
	}
	r.snap.Trees = convertAll[schedulingv1beta1.ElasticQuotaTree](r, list)
}

// boundPods reads the pods charged to quotas: bound and not finished.
func (r *reader) boundPods(ctx context.Context) {
	list, err := r.dyn.Resource(podsResource).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
	})
	if err != nil {
		r.unreadable("listing bound pods (usage and contributors are incomplete)", schema.GroupVersionResource{}, err)
		return
	}
	r.snap.Pods = convertAll[corev1.Pod](r, list)
}

func (r *reader) nodes(ctx context.Context) {
	list, err := r.dyn.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.unreadable("listing nodes", schema.GroupVersionResource{}, err)
		return
	}
	r.snap.NodesListed = true
	r.snap.Nodes = convertAll[corev1.Node](r, list)
}

func (r *reader) quotas(ctx context.Context) {
	list, err := r.dyn.Resource(quotasResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.unreadable("listing CapacityQuotas", quotasResource, err)
		return
	}
	r.snap.Quotas = convertAll[autoscalingv1beta1.CapacityQuota](r, list)
}

// autoscaler reads the cluster autoscaler's status ConfigMap, upstream's format,
// so node groups are known whatever the cloud provider.
func (r *reader) autoscaler(ctx context.Context, namespace, name string) {
	source := fmt.Sprintf("ConfigMap %s/%s", namespace, name)
	u, err := r.dyn.Resource(configMapsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.note("autoscaler status not found (no %s): node groups and upcoming nodes are unknown", source)
		return
	}
	if err != nil {
		r.unreadable("reading the autoscaler status "+source, schema.GroupVersionResource{}, err)
		return
	}
	cm := &corev1.ConfigMap{}
	if err := fromUnstructured(u, cm); err != nil {
		r.note("%v", err)
		return
	}
	doc, ok := cm.Data[api.StatusConfigMapKey]
	if !ok {
		r.note("autoscaler status %s has no %q key", source, api.StatusConfigMapKey)
		return
	}
	status, err := api.ParseStatus(doc)
	if err != nil {
		r.note("autoscaler status %s: %v", source, err)
		return
	}
	r.snap.Autoscaler = autoscalerStatus(source, status)
}

// autoscalerStatus keeps what kubectl-quota uses of the status document.
func autoscalerStatus(source string, s api.Status) *report.AutoscalerStatus {
	out := &report.AutoscalerStatus{Source: source}
	if t, err := time.Parse(statusTimeLayout, s.Time); err == nil {
		out.Time = t
	}
	if h := s.ClusterWide.Health; h.Status == api.Unhealthy {
		out.Unhealthy = fmt.Sprintf("%d of %d registered nodes are unready", h.NodeCounts.Registered.Unready.Total, h.NodeCounts.Registered.Total)
	}
	for _, g := range s.NodeGroups {
		ng := report.NodeGroupStatus{
			Name:       g.Name,
			MinSize:    g.Health.MinSize,
			MaxSize:    g.Health.MaxSize,
			Target:     g.Health.CloudProviderTarget,
			Registered: g.Health.NodeCounts.Registered.Total,
			// Instances that failed are in neither count: the autoscaler
			// deletes them within a loop or two.
			Unregistered: g.Health.NodeCounts.Unregistered + g.Health.NodeCounts.LongUnregistered,
		}
		if h := g.Health; h.Status == api.Unhealthy {
			ng.Unhealthy = fmt.Sprintf("%d of its %d nodes are ready (target %d)", h.NodeCounts.Registered.Ready, h.NodeCounts.Registered.Total, h.CloudProviderTarget)
		}
		if g.ScaleUp.Status == api.Backoff {
			ng.Backoff = g.ScaleUp.BackoffInfo.ErrorCode
			if msg := g.ScaleUp.BackoffInfo.ErrorMessage; msg != "" {
				ng.Backoff += ": " + msg
			}
		}
		out.NodeGroups = append(out.NodeGroups, ng)
	}
	return out
}

// podEvents reads the events about one pod.
func (r *reader) podEvents(ctx context.Context, pod *corev1.Pod) {
	list, err := r.dyn.Resource(eventsResource).Namespace(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name,
	})
	if err != nil {
		r.unreadable("listing the pod's events", schema.GroupVersionResource{}, err)
		return
	}
	r.snap.Events = convertAll[corev1.Event](r, list)
}

// convertAll converts a list's items to T; an item that does not convert
// becomes a note.
func convertAll[T any](r *reader, list *unstructured.UnstructuredList) []*T {
	var out []*T
	for i := range list.Items {
		obj := new(T)
		if err := fromUnstructured(&list.Items[i], obj); err != nil {
			r.note("%v", err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s %s cannot be read: %w", u.GetKind(), objectName(u), err)
	}
	return nil
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}
