// Package oracle judges, from API objects alone, whether a run kept
// Quotascale's quota promises. It is fed what informers see (nodes, pods,
// CapacityQuotas, ElasticQuotaTrees) and records every moment a promise was
// broken:
//
//   - Registered nodes over a valid CapacityQuota. Only nodes created after
//     the quota's last change count: lowering a ceiling removes no node, so
//     nodes that were already there may stay above it.
//   - A pod bound (or resized) while its leaf or an ancestor of the leaf was,
//     with it, over its max on a resource the pod asks for. Usage is the
//     summed requests of every bound pod of each leaf's namespaces, charged up
//     the tree. Only the moment a pod is admitted is judged: lowering a max
//     evicts nothing, so pods already running may stay above it.
//   - A reclaim eviction (the scheduler's preemption) that left the victim's
//     leaf below its min on a resource the victim held, judged when the
//     victim's deletion is seen, with the leaf's pods already being deleted
//     counted as gone, unless the preemptor is of the same leaf (priority
//     preemption inside one quota ignores mins) or of a namespace no tree
//     governs with a higher priority than the victim's (kube-scheduler's
//     DefaultPreemption, which knows no quota).
//   - A pod disrupted for any other reason than a reclaim or a scale-down
//     drain of a node the autoscaler marked for deletion. An eviction from a
//     node whose deletion the watch missed (after an outage) is reported as
//     unjudged instead: its mark may have come and gone unseen.
//   - No scale-up for a pod its tree refuses whatever else is charged: its
//     own requests, or its gang's smallest whole, over a max on its leaf's
//     path (scaleup.go, which also says what cannot be judged).
//   - The gang promises (gang.go).
//
// The oracle shares no code with the quota library it checks (a test fails
// if it imports any package under quota/) and is deliberately simple rather
// than fast: it recomputes sums from the objects it holds with
// resource.Quantity arithmetic, never with the library's integer units.
// Its conventions are upstream's, restated here from their documentation:
//
//   - Node capacity is status.capacity: cpu rounded up to whole cores, memory
//     in bytes, any other resource under its own name rounded up to a whole
//     unit, and "nodes" one per node. Nodes labelled type=virtual-kubelet
//     count toward nothing, as in the upstream autoscaler's quota tracker.
//   - A device class's devices (core ResourceQuota's name
//     <class>.deviceclass.resource.k8s.io/devices) on a node are the devices
//     of its node-local ResourceSlices, each pool in its newest generation,
//     whose driver some claim's allocation result shows serving the class.
//     The oracle evaluates no CEL selector: it learns which driver serves a
//     class from what the scheduler allocated, exact for classes that select
//     by driver; a class nothing was allocated from yet counts no device.
//   - A CapacityQuota is valid when its selector converts with
//     metav1.LabelSelectorAsSelector and names no instance-type label key,
//     and every limit is a non-negative whole number. A missing selector
//     selects every node.
//   - Pod requests are k8s.io/component-helpers/resource.PodRequests with the
//     options the v1.37 kube-scheduler uses.
//   - The tree in force is the oldest ElasticQuotaTree in kube-system, ties
//     broken by name. Which of its generations is valid is the one thing the
//     oracle takes from the scheduler: its status (Valid condition at the
//     object's generation). While a generation is not judged yet, admissions
//     are judged once it is, against the tree then in force.
//
// An Oracle is safe for concurrent use.
package oracle
