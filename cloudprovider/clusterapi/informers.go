package clusterapi

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// watchers are the provider's shared informers on the management cluster:
// one per Cluster API kind, and one per kind of infrastructure machine
// template, started the first time a group needs it.
type watchers struct {
	ctx     context.Context
	factory dynamicinformer.DynamicSharedInformerFactory
	byKind  map[string]informers.GenericInformer
	timeout time.Duration
	// mapper resolves an infrastructure template's kind to its resource; nil
	// without discovery.
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu sync.Mutex
	// templates are the informers and read failures of infrastructure
	// machine template kinds (templates.go).
	templates map[schema.GroupKind]*templateKind
}

func startInformers(ctx context.Context, client dynamic.Interface, d discovery.DiscoveryInterface, namespace string,
	gvrs map[string]schema.GroupVersionResource, timeout time.Duration) (*watchers, error) {
	inf := &watchers{
		ctx:       ctx,
		factory:   dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil),
		byKind:    map[string]informers.GenericInformer{},
		timeout:   timeout,
		templates: map[schema.GroupKind]*templateKind{},
	}
	if d != nil {
		inf.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
	}
	synced := make([]cache.InformerSynced, 0, len(gvrs))
	for kind, gvr := range gvrs {
		i := inf.factory.ForResource(gvr)
		inf.byKind[kind] = i
		synced = append(synced, i.Informer().HasSynced)
	}
	inf.factory.Start(ctx.Done())
	if err := inf.waitFor(synced...); err != nil {
		return nil, fmt.Errorf("clusterapi: %w", err)
	}
	return inf, nil
}

func (inf *watchers) waitFor(synced ...cache.InformerSynced) error {
	ctx, cancel := context.WithTimeout(inf.ctx, inf.timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the informers on the management cluster did not sync within %s: %w", inf.timeout, ctx.Err())
	}
	return nil
}

// list returns the cached objects of a kind, sorted by namespace and name;
// none for a kind the cluster does not serve. They are the cache's objects:
// never modify them.
func (inf *watchers) list(kind string) []*unstructured.Unstructured {
	i, ok := inf.byKind[kind]
	if !ok {
		return nil
	}
	items := i.Informer().GetStore().List()
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		if u, ok := item.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].GetNamespace() != out[b].GetNamespace() {
			return out[a].GetNamespace() < out[b].GetNamespace()
		}
		return out[a].GetName() < out[b].GetName()
	})
	return out
}

// get returns the cached object of a kind, or nil.
func (inf *watchers) get(kind, namespace, name string) *unstructured.Unstructured {
	i, ok := inf.byKind[kind]
	if !ok {
		return nil
	}
	item, exists, err := i.Informer().GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	u, _ := item.(*unstructured.Unstructured)
	return u
}

// waitForWrite waits until the cache of a kind holds what the provider
// wrote, resourceVersion rv, or something that accepted it, so that the next
// Refresh does not read the group as it was before. A cache that lags past
// the timeout only logs: the next loops read it once it catches up.
func (inf *watchers) waitForWrite(kind, namespace, name, rv string, seen func(*unstructured.Unstructured) bool) error {
	ctx, cancel := context.WithTimeout(inf.ctx, 10*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		u := inf.get(kind, namespace, name)
		return u != nil && (u.GetResourceVersion() == rv || seen(u)), nil
	})
}
