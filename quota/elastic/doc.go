// Package elastic models an ElasticQuotaTree: a hierarchy of quota nodes with
// a guaranteed min and a ceiling max per resource, namespaces hanging off the
// leaves.
//
// The semantics, shared by the scheduler and the autoscaler:
//
//   - A pod is charged to the leaf that lists its namespace and to every
//     ancestor of that leaf. Pods in namespaces no leaf lists are not limited
//     and not counted.
//   - A request is admitted when, at the leaf and at every ancestor, used plus
//     the request stays within max on every resource the request asks for.
//     It is all dimensions or none, and a resource missing from max is
//     unlimited.
//   - Usage above min is borrowed from idle min elsewhere; an owner below its
//     min gets it back through a reclaim plan (see PlanReclaim).
//   - Nothing already admitted is re-checked: lowering a max or swapping the
//     tree changes what is admitted next, never what is running.
//
// A Tree is not safe for concurrent use, not even for concurrent Admit calls:
// admission converts requests into a scratch vector the tree owns, which is
// what keeps it allocation-free. Callers serialise access with their own lock.
package elastic
