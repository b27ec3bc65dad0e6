// Package examples holds the product documents' manifests, unchanged, for the demo
// and the docs.
package examples

import _ "embed"

var (
	// ElasticQuotaTree is seed 000's tree: two teams of two leaves, 40 cpu in all.
	//
	//go:embed elasticquotatree.yaml
	ElasticQuotaTree []byte

	// CapacityQuotas are seed 001's quotas: test-capacityquota (8 cpu for the
	// test-capacityquota-class compute class) and the GPU, zone and machine-family
	// examples.
	//
	//go:embed capacityquotas.yaml
	CapacityQuotas []byte

	// ResourceFlavor is seed 000's spot flavor.
	//
	//go:embed resourceflavor.yaml
	ResourceFlavor []byte
)
