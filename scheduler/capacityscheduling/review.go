package capacityscheduling

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
	"github.com/quotascale/quotascale/scheduler/webhook"
)

var _ webhook.Reviewer = &Plugin{}

// ruleUnknownResourceFlavor is checked at write time only: the library does
// not know which ResourceFlavors exist, and a flavor deleted later makes its
// pods unschedulable with a message rather than the tree invalid.
const ruleUnknownResourceFlavor elastic.Rule = "UnknownResourceFlavor"

// ReviewTree refuses a tree that breaks any rule of the library, or names a
// ResourceFlavor that does not exist, listing every problem as the Valid
// condition would. On an update, a quota node that names the same missing
// flavor as in old is not a problem, as Kubernetes ratchets the validation
// of unchanged fields: the flavor was deleted after the tree was admitted,
// and the update does not make that worse. Renaming the node or pointing it
// at another missing flavor is refused.
func (p *Plugin) ReviewTree(ctx context.Context, old, tree *schedulingv1beta1.ElasticQuotaTree) error {
	object := tree.Namespace + "/" + tree.Name
	verr := &elastic.ValidationError{Object: object}
	if _, err := elastic.Build(tree); err != nil && !errors.As(err, &verr) {
		return err
	}
	var before []nodeFlavor
	if old != nil {
		before = ownFlavors(&old.Spec.Root, 1)
	}
	for _, named := range ownFlavors(&tree.Spec.Root, 1) {
		if len(validation.IsDNS1123Subdomain(named.flavor)) > 0 {
			continue // the library reports the name itself
		}
		if slices.Contains(before, named) {
			continue
		}
		exists, err := p.flavorExists(ctx, named.flavor)
		if err != nil {
			return fmt.Errorf("ElasticQuotaTree %s: looking up ResourceFlavor %q: %w", object, named.flavor, err)
		}
		if !exists {
			verr.Problems = append(verr.Problems, elastic.Problem{Node: named.node, Rule: ruleUnknownResourceFlavor,
				Message: fmt.Sprintf("quota node %q: ResourceFlavor %q does not exist", named.node, named.flavor)})
		}
	}
	if len(verr.Problems) == 0 {
		return nil
	}
	slices.SortFunc(verr.Problems, func(a, b elastic.Problem) int { return strings.Compare(a.Message, b.Message) })
	return verr
}

type nodeFlavor struct{ node, flavor string }

// ownFlavors lists the nodes that name a ResourceFlavor themselves, in
// depth-first order, as deep as the schema nests.
func ownFlavors(n *schedulingv1beta1.ElasticQuotaSpec, depth int) []nodeFlavor {
	var out []nodeFlavor
	if f, ok := n.Attributes[schedulingv1beta1.AttributeResourceFlavors]; ok {
		out = append(out, nodeFlavor{n.Name, f})
	}
	if depth < schedulingv1beta1.MaxDepth {
		for i := range n.Children {
			out = append(out, ownFlavors(&n.Children[i], depth+1)...)
		}
	}
	return out
}

// flavorExists asks the informer, then the API server: a flavor created just
// before the tree that names it may not have reached the informer yet.
func (p *Plugin) flavorExists(ctx context.Context, name string) (bool, error) {
	p.cache.mu.Lock()
	_, known := p.cache.flavors[name]
	p.cache.mu.Unlock()
	if known || p.dynamic == nil {
		return known, nil
	}
	_, err := p.dynamic.Resource(flavorsResource).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// ReviewResize refuses an in-place resize (pods/resize) of a charged pod that
// would take its leaf or an ancestor past max on a resource the resize
// raises. Lowering requests is always allowed, even where a max was lowered
// below usage: that only brings usage back down. A pod not charged yet is
// judged when it is scheduled.
func (p *Plugin) ReviewResize(_ context.Context, old, resized *corev1.Pod) error {
	before, after := resources.PodRequests(old), resources.PodRequests(resized)
	grows := corev1.ResourceList{}
	for name, q := range after {
		if q.Cmp(before[name]) > 0 {
			q.Sub(before[name])
			grows[name] = q
		}
	}
	if len(grows) == 0 {
		return nil
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	tree := p.cache.tree
	if tree == nil || !tree.Tracks(old.UID) {
		return nil
	}
	v := tree.Admit(resized.Namespace, grows)
	if v.Admitted() {
		return nil
	}
	return fmt.Errorf("resizing pod %s/%s from %s to %s adds %s, which its quota does not admit: %s",
		resized.Namespace, resized.Name, describe(before, grows), describe(after, grows), describe(grows, grows), v.Message())
}

// describe lists the resources of names in list, sorted, e.g. "cpu 4, memory 1Gi".
func describe(list, names corev1.ResourceList) string {
	keys := make([]string, 0, len(names))
	for name := range names {
		keys = append(keys, string(name))
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := list[corev1.ResourceName(k)]
		parts = append(parts, k+" "+q.String())
	}
	return strings.Join(parts, ", ")
}

// serveWebhook listens on the webhook's address and serves it until ctx ends.
// A listen or certificate error stops the scheduler from starting, rather than
// leaving writes unchecked behind failurePolicy: Ignore.
func (p *Plugin) serveWebhook(ctx context.Context, args WebhookArgs) error {
	cert, err := tls.LoadX509KeyPair(args.CertFile, args.KeyFile)
	if err != nil {
		return fmt.Errorf("%s webhook: loading the serving certificate: %w", Name, err)
	}
	ln, err := net.Listen("tcp", args.BindAddress)
	if err != nil {
		return fmt.Errorf("%s webhook: %w", Name, err)
	}
	logger := klog.FromContext(ctx).WithName(Name).WithName("webhook")
	logger.Info("Serving the admission webhook", "address", ln.Addr().String())
	go func() {
		if err := webhook.Serve(klog.NewContext(ctx, logger), ln, cert, webhook.Handler(func() webhook.Reviewer { return p })); err != nil {
			logger.Error(err, "The admission webhook stopped")
		}
	}()
	return nil
}
