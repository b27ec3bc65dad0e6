package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// How the provider waits for the informer of an infrastructure machine
// template kind. A kind the autoscaler may not list (no RBAC rule for it, no
// CRD) never syncs; upstream's provider then waits on it in every loop, for
// every group at zero replicas, and stalls scaling for all of them. Here the
// first wait is bounded, and a kind that did not sync is not waited for
// again until its back-off has passed, doubling per failure; its failure is
// logged once per back-off.
const (
	templateSyncWait       = 2 * time.Second
	templateInitialBackoff = 30 * time.Second
	templateMaxBackoff     = 10 * time.Minute
)

// errTemplateNotSynced is a template read that did not wait for its kind's
// first list.
var errTemplateNotSynced = errors.New("the informer of the template's kind has not synced yet")

// templateKind is one infrastructure machine template kind: its informer,
// once its resource is known, and its failures.
type templateKind struct {
	informer informers.GenericInformer
	// watchErr is the informer's last list or watch error.
	watchErr error
	// failures in a row; until is the end of the current back-off.
	failures int
	until    time.Time
}

// template returns an infrastructure machine template from the cache of its
// kind, starting that informer the first time. apiGroup and kind are a
// v1beta2 contract reference; the version is the one discovery serves.
// Without wait it does not wait for the informer's first list: a caller
// that can do without the template (its capacity annotations say enough)
// never stalls on a kind it may not read.
func (inf *watchers) template(apiGroup, kind, namespace, name string, wait bool) (*unstructured.Unstructured, error) {
	if inf.mapper == nil {
		return nil, nil
	}
	gk := schema.GroupKind{Group: apiGroup, Kind: kind}
	tk, err := inf.templateKind(gk)
	if err != nil {
		return nil, err
	}
	i := tk.informer
	if !i.Informer().HasSynced() {
		if !wait {
			// A kind whose list already failed is backed off as if waited for.
			inf.mu.Lock()
			watchErr := tk.watchErr
			inf.mu.Unlock()
			if watchErr == nil {
				return nil, errTemplateNotSynced
			}
			err := fmt.Errorf("the infrastructure objects of kind %s cannot be listed: %w", gk, watchErr)
			inf.backOff(gk, tk, err)
			return nil, err
		}
		if err := inf.waitForTemplates(gk, tk); err != nil {
			return nil, err
		}
	}
	inf.mu.Lock()
	tk.failures = 0
	inf.mu.Unlock()
	obj, err := i.Lister().ByNamespace(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("reading %s %s/%s: unexpected %T", kind, namespace, name, obj)
	}
	return u, nil
}

// templateKind returns the kind's state, starting its informer the first
// time; a kind backed off, or whose resource discovery does not know,
// returns an error at once.
func (inf *watchers) templateKind(gk schema.GroupKind) (*templateKind, error) {
	inf.mu.Lock()
	tk, ok := inf.templates[gk]
	if !ok {
		tk = &templateKind{}
		inf.templates[gk] = tk
	}
	if tk.informer != nil && tk.informer.Informer().HasSynced() {
		inf.mu.Unlock()
		return tk, nil
	}
	if now := time.Now(); now.Before(tk.until) {
		err := fmt.Errorf("the infrastructure objects of kind %s are not readable, not retried until %s: %w",
			gk, tk.until.UTC().Format(time.RFC3339), tk.lastError())
		inf.mu.Unlock()
		return nil, err
	}
	inf.mu.Unlock()
	if tk.informer != nil {
		return tk, nil
	}
	mapping, err := inf.mapper.RESTMapping(gk)
	if err != nil {
		// A kind registered after the mapper's last discovery.
		inf.mapper.Reset()
		if mapping, err = inf.mapper.RESTMapping(gk); err != nil {
			err = fmt.Errorf("finding the resource of %s: %w", gk, err)
			inf.backOff(gk, tk, err)
			return nil, err
		}
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if tk.informer == nil {
		i := inf.factory.ForResource(mapping.Resource)
		// The informer's list and watch errors are kept for the back-off's
		// one log line instead of being logged on every retry.
		_ = i.Informer().SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			inf.mu.Lock()
			tk.watchErr = err
			inf.mu.Unlock()
		})
		tk.informer = i
		inf.factory.Start(inf.ctx.Done())
	}
	return tk, nil
}

// waitForTemplates waits a bounded time for the kind's first list, and
// backs the kind off when it does not come.
func (inf *watchers) waitForTemplates(gk schema.GroupKind, tk *templateKind) error {
	ctx, cancel := context.WithTimeout(inf.ctx, min(templateSyncWait, inf.timeout))
	defer cancel()
	if cache.WaitForCacheSync(ctx.Done(), tk.informer.Informer().HasSynced) {
		return nil
	}
	inf.mu.Lock()
	cause := tk.lastError()
	inf.mu.Unlock()
	err := fmt.Errorf("the infrastructure objects of kind %s did not sync within %s: %w", gk, templateSyncWait, cause)
	inf.backOff(gk, tk, err)
	return err
}

// backOff starts the kind's next back-off and logs its failure, once.
func (inf *watchers) backOff(gk schema.GroupKind, tk *templateKind, err error) {
	inf.mu.Lock()
	tk.failures++
	backoff := templateInitialBackoff << min(tk.failures-1, 10)
	backoff = min(backoff, templateMaxBackoff)
	tk.until = time.Now().Add(backoff)
	inf.mu.Unlock()
	klog.FromContext(inf.ctx).Info("Cannot read infrastructure objects of this kind; groups whose machine templates are of this kind use their capacity annotations only, and pending Machines whose infrastructure machines are of this kind keep a placeholder provider ID",
		"kind", gk.String(), "backoff", backoff, "err", err.Error())
}

// lastError is the informer's last error, or that it has not synced.
func (tk *templateKind) lastError() error {
	if tk.watchErr != nil {
		return tk.watchErr
	}
	return errTemplateNotSynced
}
