package clusterstate

import (
	"time"

	"github.com/quotascale/quotascale/cloudprovider"
)

// Failure is a failed scale-up of a node group, as failed_scale_ups_total
// counts it: IncreaseSize failing (reason cloudProviderError), nodes not
// registered within --max-node-provision-time (timeout), or instances whose
// creation failed (their error code).
type Failure struct {
	GroupID, Reason string
	// Nodes is how many nodes did not come.
	Nodes int
}

// TakeFailures returns the failures since the last call, one per group and
// reason with their nodes summed, in the order they happened.
func (r *Registry) TakeFailures() []Failure {
	var out []Failure
	at := map[[2]string]int{}
	for _, f := range r.failures {
		key := [2]string{f.GroupID, f.Reason}
		if i, ok := at[key]; ok {
			out[i].Nodes += f.Nodes
			continue
		}
		at[key] = len(out)
		out = append(out, f)
	}
	r.failures = nil
	return out
}

// backOff starts or extends a group's backoff for a failure of nodes nodes,
// and records the failure for the metrics.
func (r *Registry) backOff(groupID string, info cloudprovider.InstanceErrorInfo, nodes int, now time.Time) {
	b := r.backoffs[groupID]
	if b == nil {
		b = &backoff{}
		r.backoffs[groupID] = b
	}
	b.fail(r.opts.Backoff, info, now)
	r.failures = append(r.failures, Failure{GroupID: groupID, Reason: info.ErrorCode, Nodes: nodes})
}
