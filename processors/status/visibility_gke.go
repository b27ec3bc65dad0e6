package status

import (
	"strconv"
	"strings"

	"github.com/quotascale/quotascale/processors"
)

// GKE's visibility events carry the same decisions under other names: a node
// group is a MIG (with its node pool), a decision has a decideTime and an
// eventId, a status a measureTime, and a failed decision is reported by a
// later resultInfo that names its eventId. Users' saved Cloud Logging queries
// and log-based alerts select on those names, so --visibility-log-format=gke
// writes them; the content is the same entries, renamed.

type gkeEntry struct {
	Logger           string               `json:"logger"`
	Decision         *gkeDecision         `json:"decision,omitempty"`
	NoDecisionStatus *gkeNoDecisionStatus `json:"noDecisionStatus,omitempty"`
	ResultInfo       *gkeResultInfo       `json:"resultInfo,omitempty"`
}

type gkeDecision struct {
	DecideTime string        `json:"decideTime"`
	EventID    string        `json:"eventId"`
	ScaleUp    *gkeScaleUp   `json:"scaleUp,omitempty"`
	ScaleDown  *gkeScaleDown `json:"scaleDown,omitempty"`
}

type gkeMig struct {
	Name string `json:"name"`
	// Nodepool is the node group too: a Quotascale node group is both the
	// pool and its one instance group.
	Nodepool string `json:"nodepool"`
	Zone     string `json:"zone,omitempty"`
}

type gkeScaleUp struct {
	IncreasedMigs            []gkeIncreasedMig `json:"increasedMigs"`
	TriggeringPods           []PodRef          `json:"triggeringPods"`
	TriggeringPodsTotalCount int               `json:"triggeringPodsTotalCount"`
}

type gkeIncreasedMig struct {
	Mig            gkeMig `json:"mig"`
	RequestedNodes int    `json:"requestedNodes"`
}

type gkeScaleDown struct {
	NodesToBeRemoved []gkeNodeToBeRemoved `json:"nodesToBeRemoved"`
}

type gkeNode struct {
	Name string `json:"name"`
	Mig  gkeMig `json:"mig"`
}

type gkeNodeToBeRemoved struct {
	Node                  gkeNode  `json:"node"`
	EvictedPods           []PodRef `json:"evictedPods,omitempty"`
	EvictedPodsTotalCount int      `json:"evictedPodsTotalCount"`
}

type gkeNoDecisionStatus struct {
	MeasureTime string          `json:"measureTime"`
	NoScaleUp   *gkeNoScaleUp   `json:"noScaleUp,omitempty"`
	NoScaleDown *gkeNoScaleDown `json:"noScaleDown,omitempty"`
}

type gkeMigReason struct {
	Mig    gkeMig `json:"mig"`
	Reason Reason `json:"reason"`
}

type gkeNoScaleUp struct {
	SkippedMigs                  []gkeMigReason         `json:"skippedMigs,omitempty"`
	UnhandledPodGroups           []gkeUnhandledPodGroup `json:"unhandledPodGroups"`
	UnhandledPodGroupsTotalCount int                    `json:"unhandledPodGroupsTotalCount"`
}

type gkeUnhandledPodGroup struct {
	PodGroup     PodGroup       `json:"podGroup"`
	RejectedMigs []gkeMigReason `json:"rejectedMigs,omitempty"`
	// PodRefusal has no GKE counterpart: pods an ElasticQuotaTree rules out.
	PodRefusal *Reason `json:"podRefusal,omitempty"`
	// Gang has no GKE counterpart either: the gang whose pods scale up
	// together, with the MIGs that would take them but may not add the
	// nodes it needs (GKE lists skipped MIGs for the whole entry only).
	Gang *gkeGang `json:"gang,omitempty"`
}

type gkeGang struct {
	GangRef
	SkippedMigs []gkeMigReason `json:"skippedMigs,omitempty"`
}

type gkeNoScaleDown struct {
	Nodes           []gkeKeptNode `json:"nodes"`
	NodesTotalCount int           `json:"nodesTotalCount"`
}

type gkeKeptNode struct {
	Node   gkeNode `json:"node"`
	Reason Reason  `json:"reason"`
}

type gkeResultInfo struct {
	MeasureTime string      `json:"measureTime"`
	Results     []gkeResult `json:"results"`
}

type gkeResult struct {
	EventID  string  `json:"eventId"`
	ErrorMsg *Reason `json:"errorMsg,omitempty"`
}

// GKE's message ids for the reasons it documents; a reason GKE has no id for
// keeps Quotascale's.
const (
	gkeMigSkipped          = "no.scale.up.mig.skipped"
	gkeMigFailingPredicate = "no.scale.up.mig.failing.predicate"
	// gkeScaleDownFailed is Quotascale's: GKE's scale-down errors name a cause
	// (eviction, marking, min size) that a failed removal here does not carry.
	gkeScaleDownFailed = "scale.down.error.failed"
)

// gkeNoScaleDownNode maps the suffix of Quotascale's no.scale.down.node.*
// ids (upstream's unremovable reasons) to GKE's ids.
var gkeNoScaleDownNode = map[string]string{
	"ScaleDownDisabledAnnotation":  "no.scale.down.node.scale.down.disabled.annotation",
	"NodeGroupMinSizeReached":      "no.scale.down.node.node.group.min.size.reached",
	"MinimalResourceLimitExceeded": "no.scale.down.node.minimal.resource.limits.exceeded",
	"NoPlaceToMovePods":            "no.scale.down.node.no.place.to.move.pods",
	"NotReplicated":                "no.scale.down.node.pod.not.backed.by.controller",
	"LocalStorageRequested":        "no.scale.down.node.pod.has.local.storage",
	"NotSafeToEvictAnnotation":     "no.scale.down.node.pod.not.safe.to.evict.annotation",
	"UnmovableKubeSystemPod":       "no.scale.down.node.pod.kube.system.unmovable",
	"NotEnoughPdb":                 "no.scale.down.node.pod.not.enough.pdb",
	"ControllerNotFound":           "no.scale.down.node.pod.controller.not.found",
	"MinReplicasReached":           "no.scale.down.node.pod.min.replicas.reached",
}

// gkeLines renders entries in GKE's schema; a scale-down with failed removals
// is followed by the resultInfo that reports them.
func gkeLines(entries []Entry, newEventID func() string) []any {
	var out []any
	for _, e := range entries {
		at := strconv.FormatInt(e.Time.Unix(), 10)
		line := gkeEntry{Logger: e.Logger}
		var failures []gkeResult
		switch {
		case e.Decision != nil:
			line.Decision = &gkeDecision{DecideTime: at, EventID: newEventID()}
			if e.Decision.ScaleUp != nil {
				line.Decision.ScaleUp = gkeScaleUpOf(e.Decision.ScaleUp)
			}
			if e.Decision.ScaleDown != nil {
				line.Decision.ScaleDown, failures = gkeScaleDownOf(e.Decision.ScaleDown, line.Decision.EventID)
			}
		case e.NoDecisionStatus != nil:
			line.NoDecisionStatus = &gkeNoDecisionStatus{MeasureTime: at}
			if e.NoDecisionStatus.NoScaleUp != nil {
				line.NoDecisionStatus.NoScaleUp = gkeNoScaleUpOf(e.NoDecisionStatus.NoScaleUp)
			}
			if e.NoDecisionStatus.NoScaleDown != nil {
				line.NoDecisionStatus.NoScaleDown = gkeNoScaleDownOf(e.NoDecisionStatus.NoScaleDown)
			}
		}
		out = append(out, line)
		if len(failures) > 0 {
			out = append(out, gkeEntry{Logger: e.Logger, ResultInfo: &gkeResultInfo{MeasureTime: at, Results: failures}})
		}
	}
	return out
}

func migOf(g NodeGroupRef) gkeMig { return gkeMig{Name: g.Name, Nodepool: g.Name, Zone: g.Zone} }

func gkeScaleUpOf(s *ScaleUpDecision) *gkeScaleUp {
	out := &gkeScaleUp{TriggeringPods: s.TriggeringPods, TriggeringPodsTotalCount: s.TriggeringPodsTotalCount}
	for _, g := range s.IncreasedNodeGroups {
		out.IncreasedMigs = append(out.IncreasedMigs, gkeIncreasedMig{Mig: migOf(g.NodeGroup), RequestedNodes: g.RequestedNodes})
	}
	return out
}

// gkeScaleDownOf lists every node the decision removes, and a result for each
// removal that failed.
func gkeScaleDownOf(s *ScaleDownDecision, eventID string) (*gkeScaleDown, []gkeResult) {
	out := &gkeScaleDown{}
	var failures []gkeResult
	for _, n := range s.NodesToBeRemoved {
		node := gkeNode{Name: n.Node.Name, Mig: migOf(NodeGroupRef{Name: n.Node.NodeGroup})}
		out.NodesToBeRemoved = append(out.NodesToBeRemoved, gkeNodeToBeRemoved{
			Node: node, EvictedPods: n.EvictedPods, EvictedPodsTotalCount: len(n.EvictedPods),
		})
		if n.Error != "" {
			failures = append(failures, gkeResult{EventID: eventID,
				ErrorMsg: &Reason{MessageID: gkeScaleDownFailed, Parameters: []string{n.Node.Name, n.Error}}})
		}
	}
	return out, failures
}

func gkeNoScaleUpOf(s *NoScaleUp) *gkeNoScaleUp {
	out := &gkeNoScaleUp{SkippedMigs: gkeMigReasons(s.SkippedNodeGroups), UnhandledPodGroupsTotalCount: s.UnhandledPodGroupsTotalCount}
	for _, g := range s.UnhandledPodGroups {
		u := gkeUnhandledPodGroup{PodGroup: g.PodGroup, RejectedMigs: gkeMigReasons(g.RejectedNodeGroups), PodRefusal: g.PodRefusal}
		if g.Gang != nil {
			u.Gang = &gkeGang{GangRef: *g.Gang, SkippedMigs: gkeMigReasons(g.SkippedNodeGroups)}
		}
		out.UnhandledPodGroups = append(out.UnhandledPodGroups, u)
	}
	return out
}

// gkeMigReasons renames the reasons of each node group. GKE reports one
// failing predicate per MIG, the plugin first and its reasons after; one
// group's rejections come from one plugin and are adjacent (the entry sorts
// them by group), so they merge into one.
func gkeMigReasons(in []NodeGroupReason) []gkeMigReason {
	var out []gkeMigReason
	for _, r := range in {
		mig := migOf(r.NodeGroup)
		switch r.Reason.MessageID {
		case processors.MessageNodeGroupSkipped:
			out = append(out, gkeMigReason{Mig: mig, Reason: Reason{MessageID: gkeMigSkipped, Parameters: r.Reason.Parameters}})
		case processors.MessageNodeGroupRejected:
			if last := len(out) - 1; last >= 0 && out[last].Mig == mig && out[last].Reason.MessageID == gkeMigFailingPredicate {
				out[last].Reason.Parameters = append(out[last].Reason.Parameters, r.Reason.Parameters...)
				continue
			}
			var params []string
			if r.Reason.Plugin != "" {
				params = append(params, r.Reason.Plugin)
			}
			params = append(params, r.Reason.Parameters...)
			out = append(out, gkeMigReason{Mig: mig, Reason: Reason{MessageID: gkeMigFailingPredicate, Parameters: params}})
		default:
			out = append(out, gkeMigReason{Mig: mig, Reason: r.Reason})
		}
	}
	return out
}

func gkeNoScaleDownOf(s *NoScaleDown) *gkeNoScaleDown {
	out := &gkeNoScaleDown{NodesTotalCount: len(s.Nodes)}
	for _, n := range s.Nodes {
		reason := n.Reason
		if id, ok := gkeNoScaleDownNode[strings.TrimPrefix(reason.MessageID, "no.scale.down.node.")]; ok {
			reason.MessageID = id
		}
		out.Nodes = append(out.Nodes, gkeKeptNode{Node: gkeNode{Name: n.Node.Name, Mig: migOf(NodeGroupRef{Name: n.Node.NodeGroup})}, Reason: reason})
	}
	return out
}
