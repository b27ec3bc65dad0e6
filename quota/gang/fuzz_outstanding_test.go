package gang

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzOutstanding checks Outstanding against a plain count over arbitrary
// gangs: each byte of members is one member, bound when its high bit is set,
// asking its low bits in millicores. What the gang still asks is the requests
// of the first unbound members, up to MinCount less the bound among the first
// MinCount, plus the asking pod's for each member missing.
func FuzzOutstanding(f *testing.F) {
	f.Add(int32(3), []byte{0x81, 0x02}, uint8(5))
	f.Add(int32(2), []byte{0x81, 0x82, 0x03}, uint8(1))
	f.Add(int32(0), []byte{}, uint8(0))
	f.Add(int32(-4), []byte{0x01}, uint8(9))
	f.Fuzz(func(t *testing.T, minCount int32, spec []byte, podMilli uint8) {
		g := Gang{Key: Key{Kind: KindLabels, Namespace: "team-a", Name: "job"}, MinCount: minCount}
		members := make([]*corev1.Pod, len(spec))
		for i, b := range spec {
			members[i] = newPod(fmt.Sprintf("m%d", i), fmt.Sprintf("%dm", b&0x7f))
			if b&0x80 != 0 {
				members[i].Spec.NodeName = "node-1"
			}
		}
		pod := newPod("asking", fmt.Sprintf("%dm", podMilli))
		bound := func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

		remaining := int64(max(minCount, 0))
		for i, m := range members {
			if int64(i) < int64(max(minCount, 0)) && bound(m) {
				remaining--
			}
		}
		var wantMilli, counted int64
		for _, m := range members {
			if !bound(m) && counted < remaining {
				q := m.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
				wantMilli += q.MilliValue()
				counted++
			}
		}
		wantStandIns := max(remaining-counted, 0)
		wantMilli += wantStandIns * int64(podMilli)

		got, standIns, ok := Outstanding(g, members, bound, pod, Charger{})
		if ok != (remaining > 0) {
			t.Fatalf("Outstanding ok = %v with %d of minCount %d still to admit", ok, remaining, minCount)
		}
		if !ok {
			return
		}
		cpu := got[corev1.ResourceCPU]
		if int64(standIns) != wantStandIns || cpu.Cmp(*resource.NewMilliQuantity(wantMilli, resource.DecimalSI)) != 0 {
			t.Fatalf("Outstanding = cpu %s, %d stand-ins; want %dm, %d", cpu.String(), standIns, wantMilli, wantStandIns)
		}
	})
}
