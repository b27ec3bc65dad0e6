package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply manager of Apply.
const FieldManager = "localcluster"

// Apply server-side applies every object of a multi-document YAML or JSON stream,
// the way `kubectl apply --server-side` does, and returns the objects as stored.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) ([]*unstructured.Unstructured, error) {
	objs, err := DecodeManifests(manifests)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("mapping %s %s: %w", gvk, obj.GetName(), err)
		}
		resource := c.Dynamic.Resource(mapping.Resource)
		body, err := obj.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		force := true
		opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
		var applied *unstructured.Unstructured
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			applied, err = resource.Namespace(ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
		} else {
			applied, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		out = append(out, applied)
	}
	return out, nil
}

// DecodeManifests splits a multi-document YAML or JSON stream into objects,
// skipping empty documents.
func DecodeManifests(manifests []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		out = append(out, obj)
	}
}
