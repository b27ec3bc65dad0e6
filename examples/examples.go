// Package examples holds the product documents' manifests, unchanged, for the demo
// and the docs.
package examples

import (
	"embed"
	"fmt"
)

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

	// Workloads are seed 000's deployments, applied in order: five pods of 5 cpu
	// in each of namespace1..namespace4.
	//
	//go:embed nginx1.yaml nginx2.yaml nginx3.yaml nginx4.yaml
	workloads embed.FS

	// CapacityQuotaWorkload is seed 001's deployment: 16 pods of 500m cpu for the
	// test compute class.
	//
	//go:embed capacityquota-workload.yaml
	CapacityQuotaWorkload []byte

	// NodeGroups are the kwok cloud's node groups for the demo.
	//
	//go:embed nodegroups.yaml
	NodeGroups []byte

	// ResourceFlavor is seed 000's spot flavor.
	//
	//go:embed resourceflavor.yaml
	ResourceFlavor []byte
)

// SeedWorkloads returns seed 000's deployments in the order the document applies
// them.
func SeedWorkloads() ([][]byte, error) {
	out := make([][]byte, 0, 4)
	for i := 1; i <= 4; i++ {
		b, err := workloads.ReadFile(fmt.Sprintf("nginx%d.yaml", i))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
