package codegen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxDepth mirrors maxDepth. It cannot import that package: the
// package does not compile until this generator has written its deepcopy code.
const maxDepth = 8

// unrollElasticQuotaTree replaces the schemaless children of the generated quota
// node schema with a copy of the node schema, MaxDepth levels deep. A structural
// schema may not refer to itself, and leaving children schemaless would let
// unknown fields and malformed quantities through without pruning or validation.
// At the last level, children must be empty, with a message saying why.
func unrollElasticQuotaTree(generated []byte) ([]byte, error) {
	if len(generated) == 0 {
		return nil, fmt.Errorf("controller-gen produced no ElasticQuotaTree CRD")
	}
	body := bytes.TrimPrefix(generated, []byte("---\n"))
	var doc map[string]any
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	versions, _ := lookup(doc, "spec", "versions").([]any)
	if len(versions) == 0 {
		return nil, fmt.Errorf("no versions in CRD")
	}
	for _, v := range versions {
		props, ok := lookup(v, "schema", "openAPIV3Schema", "properties", "spec", "properties").(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec schema not found")
		}
		node, ok := props["root"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.root schema not found")
		}
		unrolled, err := nodeAtDepth(node, 1)
		if err != nil {
			return nil, err
		}
		props["root"] = unrolled
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

func nodeAtDepth(template map[string]any, depth int) (map[string]any, error) {
	node, err := deepCopy(template)
	if err != nil {
		return nil, err
	}
	props, ok := node["properties"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("quota node schema has no properties")
	}
	children := map[string]any{
		"type":        "array",
		"description": lookup(template, "properties", "children", "description"),
	}
	if depth < maxDepth {
		child, err := nodeAtDepth(template, depth+1)
		if err != nil {
			return nil, err
		}
		children["items"] = child
		children["x-kubernetes-list-type"] = "atomic"
	} else {
		children["items"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		children["x-kubernetes-validations"] = []any{map[string]any{
			"rule": "size(self) == 0",
			"message": fmt.Sprintf("quota nodes may nest at most %d levels deep; a node at depth %d cannot have children",
				maxDepth, maxDepth),
		}}
	}
	props["children"] = children
	return node, nil
}

func lookup(v any, path ...string) any {
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

func deepCopy(m map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}
