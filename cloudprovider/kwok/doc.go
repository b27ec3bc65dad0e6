// Package kwok is a cloud for tests and demos: its node groups are described by
// a Config, its instances are records in a ConfigMap, and its machines are kwok
// nodes. The Provider is the autoscaler's side (it asks for instances); the Cloud
// is the infrastructure's side (it provisions them after a delay, fails them when
// told to, and deletes them). Because the instances live in the cluster, an
// autoscaler that restarts finds the instances it asked for, as with a real cloud.
//
// # Config
//
// A YAML or JSON document, from a file or a ConfigMap key (see ConfigSource).
// Both sides re-read it, so editing it changes the cloud at run time; an invalid
// edit is logged and the last valid config stays in force.
//
//	nodeGroups:
//	- name: n2-standard-2          # DNS-1123 label, at most 54 characters
//	  minSize: 0
//	  maxSize: 20
//	  labels: {cloud.google.com/machine-family: n2}
//	  taints: [{key: dedicated, value: batch, effect: NoSchedule}]
//	  capacity: {cpu: "2", memory: 8Gi}   # cpu and memory required; pods defaults to 110
//	  allocatable: {cpu: 1930m}           # per resource, defaults to capacity
//	  provisioningDelay: 10s              # until the node registers
//	  failures:                           # optional, for tests
//	    outOfResources: true              # or errorCode: SOME_CODE for OtherErrorClass
//	    errorCode: ZONE_RESOURCE_POOL_EXHAUSTED
//	    message: no n2 left in the zone
//	    failAfter: 3                      # fail once 3 instances run
//	    increaseSizeError: "QUOTA_EXCEEDED" # IncreaseSize itself fails
//	  devices:                            # DRA devices on every node, one pool per driver
//	  - driver: gpu.example.com
//	    count: 2                          # device-0, device-1; at most 128
//	    attributes: {model: {string: a100}}
//	    capacity: {memory: 40Gi}
//
// A node of a group with devices carries them in its DevicesAnnotation; a DRA
// driver (localcluster runs one for kwok nodes) publishes them as
// ResourceSlices (NodeResourceSlices), and the group's template node comes
// with the same slices, so that the autoscaler simulates what registers.
//
// # State
//
// The ConfigMap kube-system/quotascale-kwok-cloud (see Options) holds one key per
// node group with instances; each value is a JSON document, instances oldest
// first:
//
//	{"instances":[
//	  {"id":"kwok://n2-standard-2/n2-standard-2-x7k2p","state":"Running","createdAt":"2026-11-30T08:00:00Z"},
//	  {"id":"kwok://n2-standard-2/n2-standard-2-b9q4d","state":"Failed","createdAt":"2026-11-30T08:00:05Z",
//	   "errorClass":"OutOfResources","errorCode":"ZONE_RESOURCE_POOL_EXHAUSTED","errorMessage":"no n2 left in the zone"}]}
//
// An instance's id is also its node's spec.providerID, and the part after the
// group is the node's name. States: Creating (asked for), Running (provisioned;
// the node exists or is being created), Failed (creation failed; counts towards
// the target size until the autoscaler deletes it) and Deleting (the node is
// being deleted). The target size is the number of instances not Deleting. The
// provider and the backend both write the ConfigMap, with optimistic concurrency.
package kwok
