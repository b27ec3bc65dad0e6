// Package devices reads Dynamic Resource Allocation devices the way the
// scheduler does, for the programs that count them against a quota: which
// devices a node publishes (its node-local ResourceSlices, each pool in its
// current generation only) and which of them a DeviceClass, or a claim
// request's own selectors, select (CEL, evaluated with Kubernetes' own library,
// k8s.io/dynamic-resource-allocation/cel).
//
// The autoscaler counts each node's devices per class against CapacityQuotas,
// and the scheduler plugin counts the devices a claim with allocationMode All
// takes on a node; both call this package so that they select the same
// devices. It links the CEL interpreter, so kubectl-quota, which must stay
// small, does not import it: it reads device counts from the quotas' status.
package devices
