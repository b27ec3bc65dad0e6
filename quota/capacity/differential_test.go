package capacity

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"pgregory.net/rapid"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// differentialModel is what a sequence of changes left: the objects a fresh
// set is built from.
type differentialModel struct {
	quotas []*autoscalingv1beta1.CapacityQuota
	nodes  map[string]*corev1.Node
	groups map[string]upcomingGroup
	// asked is the template last asked about per group, so later checks hit
	// the remembered answers.
	asked map[string]*corev1.Node
}

// fresh is the full recomputation: a new set counting the model's objects.
func (m *differentialModel) fresh() *Set {
	set := Build(m.quotas, Options{})
	for _, name := range slices.Sorted(maps.Keys(m.nodes)) {
		set.AddNode(m.nodes[name])
	}
	for _, name := range slices.Sorted(maps.Keys(m.groups)) {
		set.SetUpcoming(name, m.groups[name].count, m.groups[name].template)
	}
	return set
}

// TestPropertyRememberedChecksMatchTheFullRecomputation drives one set through
// random node, upcoming and quota changes, asking AllowedDeltaFor between
// them, and compares every answer with a set built afresh from the same
// objects (and with the reference model). Run it long with
// -rapid.checks=10000.
func TestPropertyRememberedChecksMatchTheFullRecomputation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &differentialModel{nodes: map[string]*corev1.Node{}, groups: map[string]upcomingGroup{}, asked: map[string]*corev1.Node{}}
		for i := range rapid.IntRange(1, 6).Draw(t, "quotas") {
			m.quotas = append(m.quotas, drawQuota(t, i))
		}
		set := Build(m.quotas, Options{})
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			group := fmt.Sprint("g", rapid.IntRange(0, 3).Draw(t, "group"))
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1:
				n := drawNode(t, fmt.Sprint("n", rapid.IntRange(0, 9).Draw(t, "node")))
				set.AddNode(n)
				m.nodes[n.Name] = n
			case 2:
				name := fmt.Sprint("n", rapid.IntRange(0, 9).Draw(t, "removed"))
				set.RemoveNode(name)
				delete(m.nodes, name)
			case 3, 4:
				g := upcomingGroup{count: rapid.IntRange(0, 4).Draw(t, "count"), template: m.drawTemplate(t, group, step)}
				set.SetUpcoming(group, g.count, g.template)
				m.groups[group] = g
			case 5:
				set.SetUpcoming(group, 0, nil) // forgets the group
				delete(m.groups, group)
				delete(m.asked, group)
			case 6:
				m.quotas = changeQuotas(t, m.quotas)
				set = set.Rebuild(m.quotas, Options{})
			default:
				m.check(t, set, group, m.drawTemplate(t, group, step))
			}
			if rapid.Bool().Draw(t, "check every group") {
				for _, name := range slices.Sorted(maps.Keys(m.asked)) {
					m.check(t, set, name, m.asked[name])
				}
			}
		}
	})
}

// drawTemplate is the group's last asked or upcoming template, a copy of it
// (a new object with the same content), or a new one.
func (m *differentialModel) drawTemplate(t *rapid.T, group string, step int) *corev1.Node {
	last := m.asked[group]
	if last == nil {
		last = m.groups[group].template
	}
	switch choice := rapid.IntRange(0, 2).Draw(t, "template"); {
	case choice == 0 && last != nil:
		return last
	case choice == 1 && last != nil:
		return last.DeepCopy()
	default:
		return drawNode(t, fmt.Sprint("template-", group, "-", step))
	}
}

func (m *differentialModel) check(t *rapid.T, set *Set, group string, template *corev1.Node) {
	wanted := rapid.IntRange(1, 20).Draw(t, "wanted")
	m.asked[group] = template
	k, exceeded := set.AllowedDeltaFor(group, template, wanted)
	fresh := m.fresh()
	wantK, wantExceeded := fresh.AllowedDelta(template, wanted)
	if k != wantK {
		t.Fatalf("group %s, wanted %d: remembered check allows %d, full recomputation %d", group, wanted, k, wantK)
	}
	if diff := cmp.Diff(wantExceeded, exceeded, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("group %s, wanted %d: exceeded differs from the full recomputation (-full +remembered):\n%s", group, wanted, diff)
	}
	if refK, binding := referenceAllowed(fresh, m.quotas, m.nodes, m.groups, template, wanted); refK != k || len(binding) != len(exceeded) {
		t.Fatalf("group %s, wanted %d: allowed %d %+v, reference %d %v", group, wanted, k, exceeded, refK, binding)
	}
}

// changeQuotas returns quotas with one change: new amounts for one quota's
// limits (the set updates in place), or one quota replaced, added or removed
// (the set is rebuilt). The input is not modified.
func changeQuotas(t *rapid.T, quotas []*autoscalingv1beta1.CapacityQuota) []*autoscalingv1beta1.CapacityQuota {
	out := slices.Clone(quotas)
	i := rapid.IntRange(0, len(out)-1).Draw(t, "changed quota")
	switch rapid.IntRange(0, 3).Draw(t, "quota change") {
	case 0, 1:
		q := out[i].DeepCopy()
		for _, name := range slices.Sorted(maps.Keys(q.Spec.Limits.Resources)) {
			amount := rapid.IntRange(0, 40).Draw(t, "new amount")
			if name == "memory" {
				q.Spec.Limits.Resources[name] = *resource.NewQuantity(int64(amount)<<30, resource.BinarySI)
			} else {
				q.Spec.Limits.Resources[name] = *resource.NewQuantity(int64(amount), resource.DecimalSI)
			}
		}
		out[i] = q
	case 2:
		q := drawQuota(t, 0)
		q.Name = out[i].Name
		out[i] = q
	default:
		if len(out) > 1 && rapid.Bool().Draw(t, "remove") {
			out = slices.Delete(out, i, i+1)
			break
		}
		unused := 0
		for slices.ContainsFunc(out, func(q *autoscalingv1beta1.CapacityQuota) bool { return q.Name == fmt.Sprint("q", unused) }) {
			unused++
		}
		out = append(out, drawQuota(t, unused))
	}
	return out
}
