package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

// VisibilityLogger is the logger name of visibility entries, so they can be told
// apart from the autoscaler's own logs on a shared stream.
const VisibilityLogger = "cluster-autoscaler-visibility"

// VisibilityLog writes one JSON object per scale-up decision (scaleUp) and per
// loop where pods stayed pending (noScaleUp), one per line. The schema is
// documented in docs/visibility-log.md.
type VisibilityLog struct {
	mu     sync.Mutex
	out    io.Writer
	format VisibilityFormat
	// newEventID names a GKE-format decision, so that a later resultInfo can
	// refer to it.
	newEventID func() string
}

// VisibilityFormat is the schema of the visibility log's lines.
type VisibilityFormat string

const (
	// FormatQuotascale is the schema of docs/visibility-log.md: node groups.
	FormatQuotascale VisibilityFormat = "quotascale"
	// FormatGKE is the schema of GKE's cluster autoscaler visibility events:
	// MIGs, GKE's message ids, decideTime and eventId.
	FormatGKE VisibilityFormat = "gke"
)

// VisibilityFormats are the formats --visibility-log-format accepts.
var VisibilityFormats = []VisibilityFormat{FormatGKE, FormatQuotascale}

// ParseVisibilityFormat returns the format named s.
func ParseVisibilityFormat(s string) (VisibilityFormat, error) {
	for _, f := range VisibilityFormats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown visibility log format %q, want one of %v", s, VisibilityFormats)
}

// NewVisibilityLog writes entries to out in format.
func NewVisibilityLog(out io.Writer, format VisibilityFormat) *VisibilityLog {
	return &VisibilityLog{out: out, format: format, newEventID: func() string { return string(uuid.NewUUID()) }}
}

var (
	_ processors.ScaleUpStatusProcessor   = &VisibilityLog{}
	_ processors.ScaleDownStatusProcessor = &VisibilityLog{}
)

// Entry is one line of the visibility log.
type Entry struct {
	Time             time.Time         `json:"time"`
	Logger           string            `json:"logger"`
	Decision         *Decision         `json:"decision,omitempty"`
	NoDecisionStatus *NoDecisionStatus `json:"noDecisionStatus,omitempty"`
}

// Decision is a scale-up or scale-down the autoscaler made.
type Decision struct {
	ScaleUp   *ScaleUpDecision   `json:"scaleUp,omitempty"`
	ScaleDown *ScaleDownDecision `json:"scaleDown,omitempty"`
}

// ScaleDownDecision lists the nodes removed.
type ScaleDownDecision struct {
	NodesToBeRemoved []NodeToBeRemoved `json:"nodesToBeRemoved"`
}

// NodeToBeRemoved is a node with the pods evicted from it.
type NodeToBeRemoved struct {
	Node        NodeRef  `json:"node"`
	EvictedPods []PodRef `json:"evictedPods,omitempty"`
	// Error is set when the removal failed and was rolled back.
	Error string `json:"error,omitempty"`
}

// NodeRef names a node and its group.
type NodeRef struct {
	Name      string `json:"name"`
	NodeGroup string `json:"nodeGroup"`
}

// ScaleUpDecision lists the groups increased and the pods they are for.
type ScaleUpDecision struct {
	IncreasedNodeGroups      []IncreasedNodeGroup `json:"increasedNodeGroups"`
	TriggeringPods           []PodRef             `json:"triggeringPods"`
	TriggeringPodsTotalCount int                  `json:"triggeringPodsTotalCount"`
}

// IncreasedNodeGroup is one group grown.
type IncreasedNodeGroup struct {
	NodeGroup      NodeGroupRef `json:"nodeGroup"`
	RequestedNodes int          `json:"requestedNodes"`
	From           int          `json:"from"`
	To             int          `json:"to"`
	Max            int          `json:"max"`
}

// NoDecisionStatus explains a loop that left pods pending, or nodes that look
// unneeded but stay.
type NoDecisionStatus struct {
	NoScaleUp   *NoScaleUp   `json:"noScaleUp,omitempty"`
	NoScaleDown *NoScaleDown `json:"noScaleDown,omitempty"`
}

// NoScaleDown lists underutilized nodes that are kept, each with why.
type NoScaleDown struct {
	Nodes []KeptNode `json:"nodes"`
}

// KeptNode is an underutilized node that stays.
type KeptNode struct {
	Node   NodeRef `json:"node"`
	Reason Reason  `json:"reason"`
}

// NoScaleUp lists the node groups skipped for every pod group (with why), and
// each pod group left unhandled.
type NoScaleUp struct {
	SkippedNodeGroups            []NodeGroupReason   `json:"skippedNodeGroups,omitempty"`
	UnhandledPodGroups           []UnhandledPodGroup `json:"unhandledPodGroups"`
	UnhandledPodGroupsTotalCount int                 `json:"unhandledPodGroupsTotalCount"`
}

// UnhandledPodGroup is an equivalence group of pods no scale-up helps.
type UnhandledPodGroup struct {
	PodGroup           PodGroup          `json:"podGroup"`
	RejectedNodeGroups []NodeGroupReason `json:"rejectedNodeGroups,omitempty"`
	SkippedNodeGroups  []NodeGroupReason `json:"skippedNodeGroups,omitempty"`
	// PodRefusal is set when the pods were ruled out before any node group was
	// considered, e.g. by their ElasticQuotaTree.
	PodRefusal *Reason `json:"podRefusal,omitempty"`
	// Gang is set when the pods are a gang's, which gets new nodes for all
	// its pods together or none.
	Gang *GangRef `json:"gang,omitempty"`
}

// GangRef names a gang: a Workload API PodGroup or ACK's gang labels.
type GangRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	MinCount  int32  `json:"minCount"`
}

func gangRef(g *gang.Gang) *GangRef {
	if g == nil {
		return nil
	}
	return &GangRef{Kind: string(g.Key.Kind), Namespace: g.Key.Namespace, Name: g.Key.Name, MinCount: g.MinCount}
}

// PodGroup is a sample pod and how many pods it stands for.
type PodGroup struct {
	SamplePod     PodRef `json:"samplePod"`
	TotalPodCount int    `json:"totalPodCount"`
}

// PodRef names a pod and its controller.
type PodRef struct {
	Name       string         `json:"name"`
	Namespace  string         `json:"namespace"`
	Controller *ControllerRef `json:"controller,omitempty"`
}

// ControllerRef names a pod's controller.
type ControllerRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// NodeGroupRef names a node group and its zone.
type NodeGroupRef struct {
	Name string `json:"name"`
	Zone string `json:"zone,omitempty"`
}

// NodeGroupReason is a node group with the reason it was rejected or skipped.
type NodeGroupReason struct {
	NodeGroup NodeGroupRef `json:"nodeGroup"`
	Reason    Reason       `json:"reason"`
}

// Reason is a message id with its parameters.
type Reason struct {
	MessageID  string   `json:"messageId"`
	Parameters []string `json:"parameters"`
	// Plugin is the scheduler plugin that rejected a node group; only GKE's
	// format prints it.
	Plugin string `json:"-"`
}

// ProcessScaleDown writes a scaleDown entry for the nodes removed (or whose
// removal failed) and a noScaleDown entry for the nodes kept.
func (v *VisibilityLog) ProcessScaleDown(ctx context.Context, lc *processors.LoopContext, s *processors.ScaleDownStatus) {
	var entries []Entry
	if len(s.Removed) > 0 || len(s.Failed) > 0 {
		d := &ScaleDownDecision{}
		for _, r := range s.Removed {
			d.NodesToBeRemoved = append(d.NodesToBeRemoved, nodeToBeRemoved(r, ""))
		}
		for _, f := range s.Failed {
			d.NodesToBeRemoved = append(d.NodesToBeRemoved, nodeToBeRemoved(f.NodeRemoval, f.Err.Error()))
		}
		entries = append(entries, Entry{Time: lc.Now.UTC(), Logger: VisibilityLogger, Decision: &Decision{ScaleDown: d}})
	}
	if len(s.Kept) > 0 {
		n := &NoScaleDown{}
		for _, k := range s.Kept {
			n.Nodes = append(n.Nodes, KeptNode{Node: NodeRef{Name: k.Node.Name, NodeGroup: k.GroupID},
				Reason: Reason{MessageID: k.Reason.MessageID, Parameters: k.Reason.Parameters}})
		}
		sort.Slice(n.Nodes, func(i, j int) bool { return n.Nodes[i].Node.Name < n.Nodes[j].Node.Name })
		entries = append(entries, Entry{Time: lc.Now.UTC(), Logger: VisibilityLogger, NoDecisionStatus: &NoDecisionStatus{NoScaleDown: n}})
	}
	v.write(ctx, entries)
}

func nodeToBeRemoved(r processors.NodeRemoval, errText string) NodeToBeRemoved {
	n := NodeToBeRemoved{Node: NodeRef{Name: r.Node.Name, NodeGroup: r.GroupID}, Error: errText}
	for i, p := range r.Evicted {
		if i == maxPodsListed {
			break
		}
		n.EvictedPods = append(n.EvictedPods, podRef(p))
	}
	return n
}

// maxPodsListed bounds the triggering pods an entry lists, as the count says the
// rest.
const maxPodsListed = 25

// Process writes the loop's entries.
func (v *VisibilityLog) Process(ctx context.Context, lc *processors.LoopContext, s *processors.ScaleUpStatus) {
	var entries []Entry
	if len(s.Increases) > 0 {
		d := &ScaleUpDecision{TriggeringPodsTotalCount: len(s.PodsTriggeredScaleUp)}
		for _, inc := range s.Increases {
			d.IncreasedNodeGroups = append(d.IncreasedNodeGroups, IncreasedNodeGroup{
				NodeGroup: groupRef(lc, inc.Group.Id()), RequestedNodes: inc.New - inc.Current, From: inc.Current, To: inc.New, Max: inc.Max,
			})
		}
		for i, p := range s.PodsTriggeredScaleUp {
			if i == maxPodsListed {
				break
			}
			d.TriggeringPods = append(d.TriggeringPods, podRef(p))
		}
		entries = append(entries, Entry{Time: lc.Now.UTC(), Logger: VisibilityLogger, Decision: &Decision{ScaleUp: d}})
	}
	if len(s.PodsRemainUnschedulable) > 0 || len(s.Refused) > 0 {
		entries = append(entries, Entry{Time: lc.Now.UTC(), Logger: VisibilityLogger, NoDecisionStatus: &NoDecisionStatus{NoScaleUp: noScaleUp(lc, s)}})
	}
	v.write(ctx, entries)
}

func (v *VisibilityLog) write(ctx context.Context, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	var lines []any
	if v.format == FormatGKE {
		lines = gkeLines(entries, v.newEventID)
	} else {
		for _, e := range entries {
			lines = append(lines, e)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	enc := json.NewEncoder(v.out)
	for _, e := range lines {
		if err := enc.Encode(e); err != nil {
			klog.FromContext(ctx).Error(err, "Writing the visibility log")
			return
		}
	}
}

func noScaleUp(lc *processors.LoopContext, s *processors.ScaleUpStatus) *NoScaleUp {
	out := &NoScaleUp{}
	skipped := map[string]map[string]processors.Reason{}
	for _, info := range s.PodsRemainUnschedulable {
		g := UnhandledPodGroup{
			PodGroup:           PodGroup{SamplePod: podRef(info.Pods[0]), TotalPodCount: len(info.Pods)},
			RejectedNodeGroups: groupReasons(lc, info.Rejected),
			SkippedNodeGroups:  groupReasons(lc, info.Skipped),
			Gang:               gangRef(info.Gang),
		}
		for id, reasons := range info.Skipped {
			if skipped[id] == nil {
				skipped[id] = map[string]processors.Reason{}
			}
			for _, r := range reasons {
				skipped[id][r.Message] = r
			}
		}
		out.UnhandledPodGroups = append(out.UnhandledPodGroups, g)
	}
	for _, r := range s.Refused {
		out.UnhandledPodGroups = append(out.UnhandledPodGroups, UnhandledPodGroup{
			PodGroup:   PodGroup{SamplePod: podRef(r.Pod), TotalPodCount: 1},
			PodRefusal: &Reason{MessageID: r.Reason.MessageID, Parameters: r.Reason.Parameters},
			Gang:       gangRef(r.Gang),
		})
	}
	byGroup := map[string][]processors.Reason{}
	for id, reasons := range skipped {
		for _, r := range reasons {
			byGroup[id] = append(byGroup[id], r)
		}
	}
	out.SkippedNodeGroups = groupReasons(lc, byGroup)
	out.UnhandledPodGroupsTotalCount = len(out.UnhandledPodGroups)
	return out
}

// groupReasons flattens reasons per group, sorted by group then message.
func groupReasons(lc *processors.LoopContext, byGroup map[string][]processors.Reason) []NodeGroupReason {
	var out []NodeGroupReason
	for id, reasons := range byGroup {
		for _, r := range reasons {
			out = append(out, NodeGroupReason{NodeGroup: groupRef(lc, id), Reason: Reason{MessageID: r.MessageID, Parameters: r.Parameters, Plugin: r.Plugin}})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NodeGroup.Name != out[j].NodeGroup.Name {
			return out[i].NodeGroup.Name < out[j].NodeGroup.Name
		}
		return joinParams(out[i].Reason) < joinParams(out[j].Reason)
	})
	return out
}

func joinParams(r Reason) string {
	s := r.MessageID
	for _, p := range r.Parameters {
		s += "\x00" + p
	}
	return s
}

func groupRef(lc *processors.LoopContext, id string) NodeGroupRef {
	ref := NodeGroupRef{Name: id}
	if t := lc.Templates[id]; t != nil && t.Node != nil {
		ref.Zone = t.Node.Labels[corev1.LabelTopologyZone]
	}
	return ref
}

func podRef(p *corev1.Pod) PodRef {
	ref := PodRef{Name: p.Name, Namespace: p.Namespace}
	if c := metav1.GetControllerOf(p); c != nil {
		ref.Controller = &ControllerRef{APIVersion: c.APIVersion, Kind: c.Kind, Name: c.Name}
	}
	return ref
}
