// Package typedinformer watches custom resources through the dynamic client while
// keeping typed objects in the informer's store, without generated clientsets.
package typedinformer

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// New watches a custom resource through the dynamic client and keeps
// typed objects in its store. The transform runs once per object as it arrives. An
// object that does not convert (the CRD schema makes that unlikely) stays
// unstructured; handlers skip what is not of their type rather than fail.
func New[T any, PT interface {
	*T
	runtime.Object
}](client dynamic.Interface, gvr schema.GroupVersionResource, resync time.Duration) cache.SharedIndexInformer {
	resource := client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, resync, cache.Indexers{})
	_ = informer.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		typed := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return u, nil
		}
		return typed, nil
	})
	return informer
}
