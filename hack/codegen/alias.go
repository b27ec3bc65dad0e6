package codegen

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// servedAlias is an older version of a CRD that is still served with the
// schema of a newer one. Clusters that created objects under the older version
// keep it in the CRD's status.storedVersions, and the API server refuses a CRD
// that drops a stored version; serving it with the same schema lets the API
// server convert with strategy None (it only rewrites apiVersion), so no
// webhook is needed and no field can be lost either way.
type servedAlias struct {
	file string // CRD manifest, relative to CRDDir
	of   string // the version whose schema, columns and subresources it takes
	name string // the older version
}

// servedAliases lists the deprecated versions Quotascale serves. Upstream's
// cluster autoscaler served CapacityQuota v1alpha1 before v1beta1, with a
// schema identical to v1beta1's, and still serves it, deprecated, beside it.
var servedAliases = []servedAlias{
	{file: "autoscaling.x-k8s.io_capacityquotas.yaml", of: "v1beta1", name: "v1alpha1"},
}

// addServedAliases rewrites the generated CRDs of files so that each alias is
// served, deprecated and not stored, with the API server's default deprecation
// warning, as upstream's v1alpha1 is.
func addServedAliases(files map[string][]byte) error {
	for _, a := range servedAliases {
		path := CRDDir + "/" + a.file
		out, err := addServedAlias(files[path], a)
		if err != nil {
			return fmt.Errorf("adding version %s to %s: %w", a.name, path, err)
		}
		files[path] = out
	}
	return nil
}

func addServedAlias(generated []byte, a servedAlias) ([]byte, error) {
	if len(generated) == 0 {
		return nil, fmt.Errorf("controller-gen produced no CRD")
	}
	var doc map[string]any
	if err := yaml.Unmarshal(bytes.TrimPrefix(generated, []byte("---\n")), &doc); err != nil {
		return nil, err
	}
	spec, _ := doc["spec"].(map[string]any)
	versions, _ := lookup(doc, "spec", "versions").([]any)
	i := slices.IndexFunc(versions, func(v any) bool { return lookup(v, "name") == a.of })
	if i < 0 {
		return nil, fmt.Errorf("no version %s", a.of)
	}
	if slices.ContainsFunc(versions, func(v any) bool { return lookup(v, "name") == a.name }) {
		return nil, fmt.Errorf("version %s is generated already", a.name)
	}
	alias, err := deepCopy(versions[i].(map[string]any))
	if err != nil {
		return nil, err
	}
	alias["name"] = a.name
	alias["served"] = true
	alias["storage"] = false
	alias["deprecated"] = true
	versions = append(versions, alias)
	// controller-gen lists versions by name; so does upstream's manifest.
	slices.SortFunc(versions, func(x, y any) int {
		return strings.Compare(lookup(x, "name").(string), lookup(y, "name").(string))
	})
	spec["versions"] = versions
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}
