package expander

import (
	"math/big"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// leastWaste keeps the options that leave the smallest share of the new nodes'
// cpu and memory idle: score = idle cpu fraction + idle memory fraction, the same
// blend upstream uses, measured against allocatable rather than capacity because
// that is what pods can actually get.
type leastWaste struct{}

func (leastWaste) BestOptions(options []Option) []Option {
	scores := make([]*big.Rat, len(options))
	requests := requestMemo{}
	for i := range options {
		scores[i] = wasteScore(&options[i], requests)
	}
	return pick(options, bestIndices(len(options), func(i, j int) int {
		return scores[j].Cmp(scores[i]) // less waste wins
	}))
}

// wasteScore is exact so that options wasting the same amount tie, and the next
// stage decides, instead of float rounding picking a winner (0.1+0.2 vs 0.3).
func wasteScore(o *Option, requests requestMemo) *big.Rat {
	var cpuRequested, memRequested int64
	for _, pod := range o.Pods {
		r := requests.of(pod)
		cpuRequested += r.cpu
		memRequested += r.memory
	}
	var cpuPerNode, memPerNode int64
	if o.Template != nil {
		cpuPerNode = o.Template.Status.Allocatable.Cpu().MilliValue()
		memPerNode = o.Template.Status.Allocatable.Memory().Value()
	}
	score := wastedFraction(cpuRequested, cpuPerNode, o.NodeCount)
	return score.Add(score, wastedFraction(memRequested, memPerNode, o.NodeCount))
}

// requestMemo keeps each pod's cpu (millicores) and memory (bytes) requests
// for one choice: the options of a loop share most of their pods, and
// computing the requests anew per option costs options x pods.
type requestMemo map[*corev1.Pod]struct{ cpu, memory int64 }

func (m requestMemo) of(pod *corev1.Pod) struct{ cpu, memory int64 } {
	r, ok := m[pod]
	if !ok {
		req := resources.PodRequests(pod)
		r.cpu, r.memory = req.Cpu().MilliValue(), req.Memory().Value()
		m[pod] = r
	}
	return r
}

// wastedFraction is (available - requested) / available. Requests above what is
// available give a negative value, as upstream: the estimator should never
// produce that, and clamping would hide it by tying with a perfect fit.
//
// Nothing available (no template, no allocatable, no nodes) counts as fully
// wasted: such a template is almost always incomplete, and rating it a perfect
// fit would steer scale-ups to the group we know least about.
func wastedFraction(requested, perNode int64, nodes int) *big.Rat {
	available := new(big.Int).Mul(big.NewInt(perNode), big.NewInt(int64(nodes)))
	if available.Sign() <= 0 {
		return big.NewRat(1, 1)
	}
	idle := new(big.Int).Sub(available, big.NewInt(requested))
	return new(big.Rat).SetFrac(idle, available)
}
