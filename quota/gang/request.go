package gang

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/resources"
)

// Members picks the live pods of gang key out of pods: not finished, not being
// deleted. They come in a fixed order, bound pods first, then by creation
// time and name, so that every program that takes "the first MinCount
// members" takes the same ones.
func Members(key Key, pods []*corev1.Pod) []*corev1.Pod {
	var members []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || resources.PodFinished(p) {
			continue
		}
		if k, ok := RefOf(p); ok && k == key {
			members = append(members, p)
		}
	}
	slices.SortFunc(members, compareMembers)
	return members
}

func compareMembers(a, b *corev1.Pod) int {
	if ab, bb := a.Spec.NodeName != "", b.Spec.NodeName != ""; ab != bb {
		if ab {
			return -1
		}
		return 1
	}
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Charger says what each pod of a gang charges its quota, under
// quota/claims' rule: its own requests and devices, and the ResourceClaims it
// shares with other pods, which count once whichever pods use them. The zero
// Charger counts requests only (resources.PodRequests), for a caller that
// reads no claims.
type Charger struct {
	// Charge is a pod's charge; nil counts its requests only.
	Charge func(*corev1.Pod) claims.Charge
	// SharedCharged reports a shared claim the quota already charges, which
	// the gang does not ask again; nil for none.
	SharedCharged func(types.UID) bool
}

func (c Charger) charge(pod *corev1.Pod) claims.Charge {
	if c.Charge == nil {
		return claims.Charge{Own: resources.PodRequests(pod)}
	}
	return c.Charge(pod)
}

// Request is what gang g asks of its quota when pod asks on its behalf: the
// charges of its first MinCount members (as Members orders them), and pod's
// own charge in place of each member not created yet; a claim shared by
// several of them counts once. The second result is how many such stand-ins
// were counted. A gang is admitted for MinCount pods; members beyond that are
// judged one by one, like any other pod.
func Request(g Gang, members []*corev1.Pod, pod *corev1.Pod, charger Charger) (corev1.ResourceList, int) {
	total := corev1.ResourceList{}
	var shared map[types.UID]bool
	addShared := func(ch claims.Charge) {
		for _, s := range ch.Shared {
			if shared[s.Key] || (charger.SharedCharged != nil && charger.SharedCharged(s.Key)) {
				continue
			}
			if shared == nil {
				shared = map[types.UID]bool{}
			}
			shared[s.Key] = true
			addList(total, s.Requests, 1)
		}
	}
	counted := min(len(members), int(max(g.MinCount, 0)))
	for _, m := range members[:counted] {
		ch := charger.charge(m)
		addList(total, ch.Own, 1)
		addShared(ch)
	}
	standIns := int(max(g.MinCount, 0)) - counted
	if standIns > 0 {
		ch := charger.charge(pod)
		addList(total, ch.Own, standIns)
		addShared(ch)
	}
	return total, standIns
}

// addList adds times x src to dst in the units quota counts in, saturating
// rather than overflowing: a gang label may ask for two billion pods.
func addList(dst, src corev1.ResourceList, times int) {
	for name, q := range src {
		units := resources.SaturatingMul(resources.Units(name, q), int64(times))
		if have, ok := dst[name]; ok {
			units = resources.SaturatingAdd(units, resources.Units(name, have))
		}
		dst[name] = resources.Quantity(name, units)
	}
}

// Split is how a gang's members not charged yet stand against its quota:
// the tree admits a gang for MinCount pods, together, and judges every pod
// beyond them alone, as it judges a pod of no gang.
type Split struct {
	// Unit are the members the gang is still admitted for as one: the first
	// of its uncharged members, up to MinCount less the members among the
	// first MinCount that are charged already.
	Unit []*corev1.Pod
	// Missing is how many members the unit lacks because they are not
	// created yet.
	Missing int
	// Past are the uncharged members beyond the unit, judged one by one.
	Past []*corev1.Pod
}

// Whole says whether the gang needs no admission as a gang any more: its
// first MinCount members are all charged, and each further pod is judged
// alone.
func (s Split) Whole() bool { return len(s.Unit) == 0 && s.Missing == 0 }

// SplitMembers splits gang g's members (as Members orders them) into the
// unit the tree still admits together and the members past it. charged
// reports the members that hold their own quota already: bound pods, and for
// the scheduler the pods it has reserved. The scheduler plugin and the
// autoscaler both split a gang here, so that the autoscaler adds nodes for
// exactly the pods the tree admits as a gang.
func SplitMembers(g Gang, members []*corev1.Pod, charged func(*corev1.Pod) bool) Split {
	need := int(max(g.MinCount, 0))
	var pending []*corev1.Pod
	for i, m := range members {
		switch {
		case !charged(m):
			pending = append(pending, m)
		case i < int(max(g.MinCount, 0)):
			need--
		}
	}
	var s Split
	if need <= 0 {
		s.Past = pending
		return s
	}
	n := min(need, len(pending))
	s.Unit, s.Past, s.Missing = pending[:n:n], pending[n:], need-n
	return s
}

// Outstanding is what gang g still asks of its quota for pod when some of its
// members already hold their own quota (charged, as for SplitMembers): the
// charges of its unit, and pod's in place of each member missing from it, as
// Request counts them. ok is false when the gang is whole (Split.Whole):
// each further pod is judged alone. The scheduler plugin, the autoscaler and
// kubectl-quota all ask this, so that the gang a user is told about is the
// gang the scheduler admits. charger is as for Request.
func Outstanding(g Gang, members []*corev1.Pod, charged func(*corev1.Pod) bool, pod *corev1.Pod, charger Charger) (request corev1.ResourceList, standIns int, ok bool) {
	s := SplitMembers(g, members, charged)
	if s.Whole() {
		return nil, 0, false
	}
	request, standIns = s.Request(g.Key, pod, charger)
	return request, standIns, true
}

// Request is what the unit asks of its quota, with pod standing in for each
// member missing, as Request counts a gang's first members; the second
// result is the number of stand-ins.
func (s Split) Request(key Key, pod *corev1.Pod, charger Charger) (corev1.ResourceList, int) {
	return Request(Gang{Key: key, MinCount: int32(len(s.Unit) + s.Missing)}, s.Unit, pod, charger)
}
