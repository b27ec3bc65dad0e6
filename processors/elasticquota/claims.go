package elasticquota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
	"github.com/quotascale/quotascale/quota/resources"
)

// WithClaims makes the processor read pods' Dynamic Resource Allocation
// devices with quota/claims' rule, as the scheduler's CapacityScheduling
// plugin does: a pod whose claims would take its leaf past a device max
// triggers no scale-up. Without it only pods' requests count.
func (p *Processor) WithClaims(claimLister resourcelisters.ResourceClaimLister, classLister resourcelisters.DeviceClassLister) *Processor {
	p.claimLister, p.classLister = claimLister, classLister
	return p
}

// pass is what one loop charges pods with: the rule's lookup over the
// informers' claims and classes, and the shared claims already charged.
type pass struct {
	lookup claims.Lookup
	tree   *elastic.Tree
	// held are the shared claims the pods admitted in this loop hold.
	held sets.Set[types.UID]
}

// newPass reads the DeviceClasses once for the loop; nil lookup without
// WithClaims.
func (p *Processor) newPass(tree *elastic.Tree) (*pass, error) {
	ps := &pass{tree: tree, held: sets.New[types.UID]()}
	if p.claimLister == nil || p.classLister == nil {
		return ps, nil
	}
	classes, err := p.classLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	ps.lookup = claims.Listed{Claims: func(namespace, name string) *resourcev1.ResourceClaim {
		c, err := p.claimLister.ResourceClaims(namespace).Get(name)
		if err != nil {
			return nil
		}
		return c
	}, Classes: claims.NewClasses(classes)}
	return ps, nil
}

// chargeBound charges a bound pod: its own charge, and each shared claim it
// uses once, however many pods use it. What cannot be read (a claim gone) is
// left out, as the scheduler charges it.
func (ps *pass) chargeBound(pod *corev1.Pod) {
	_, _ = claims.ChargeCounted(ps.tree, pod, ps.lookup)
}

// admit admits a pending pod against scratch and charges it if it fits: its
// own charge plus the shared claims no bound pod, nor a pod admitted before
// it in this loop, holds yet.
func (ps *pass) admit(scratch *elastic.Scratch, pod *corev1.Pod) elastic.Verdict {
	if ps.lookup == nil {
		return scratch.Add(pod.Namespace, resources.PodRequests(pod))
	}
	ch, _ := claims.PodCharge(pod, ps.lookup)
	verdict := scratch.Add(pod.Namespace, ch.Request(func(key types.UID) bool { return ps.tree.Tracks(key) || ps.held.Has(key) }))
	if verdict.Admitted() {
		for _, s := range ch.Shared {
			ps.held.Insert(s.Key)
		}
	}
	return verdict
}

// gangCharger charges a gang's members as admit charges a pod: their devices
// count, and a shared claim that a bound pod, or a pod admitted before in
// this loop, holds is not asked again. Every shared claim a member names is
// recorded in named, for the gang to hold once admitted. Without a lookup it
// counts requests.
func (ps *pass) gangCharger(named sets.Set[types.UID]) gang.Charger {
	if ps.lookup == nil {
		return gang.Charger{}
	}
	return gang.Charger{
		Charge: func(pod *corev1.Pod) claims.Charge {
			ch, _ := claims.PodCharge(pod, ps.lookup)
			for _, s := range ch.Shared {
				named.Insert(s.Key)
			}
			return ch
		},
		SharedCharged: func(key types.UID) bool { return ps.tree.Tracks(key) || ps.held.Has(key) },
	}
}
