package resources

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

const gpu corev1.ResourceName = "nvidia.com/gpu"

func TestUnits(t *testing.T) {
	tests := []struct {
		name     corev1.ResourceName
		quantity string
		want     int64
	}{
		{corev1.ResourceCPU, "5", 5000},
		{corev1.ResourceCPU, "500m", 500},
		{corev1.ResourceCPU, "0.0001", 1}, // rounded up, never under-counted
		{corev1.ResourceCPU, "-1", 0},
		{corev1.ResourceCPU, "0", 0},
		{corev1.ResourceCPU, "9223372036854775807", Unlimited},
		{corev1.ResourceCPU, "9300000000000000", Unlimited}, // fits int64 as cores, not as millicores
		{corev1.ResourceMemory, "20Gi", 20 << 30},
		{corev1.ResourceMemory, "1.5", 2},
		{corev1.ResourceMemory, "1e30", Unlimited},
		{corev1.ResourceMemory, "100000000000000000000000000000000000000000000", Unlimited},
		{gpu, "4", 4},
		{"nodes", "64", 64},
	}
	for _, tt := range tests {
		t.Run(string(tt.name)+"="+tt.quantity, func(t *testing.T) {
			if got := Units(tt.name, resource.MustParse(tt.quantity)); got != tt.want {
				t.Errorf("Units(%s, %s) = %d, want %d", tt.name, tt.quantity, got, tt.want)
			}
		})
	}
}

func TestFormatAndQuantity(t *testing.T) {
	tests := []struct {
		name  corev1.ResourceName
		units int64
		want  string
	}{
		{corev1.ResourceCPU, 5000, "5"},
		{corev1.ResourceCPU, 500, "500m"},
		{corev1.ResourceMemory, 20 << 30, "20Gi"},
		{corev1.ResourceMemory, 1000000000, "1G"},
		{corev1.ResourceEphemeralStorage, 1 << 30, "1Gi"},
		{"hugepages-2Mi", 2 << 20, "2Mi"},
		{gpu, 4, "4"},
		{gpu, Unlimited, "unlimited"},
	}
	for _, tt := range tests {
		if got := Format(tt.name, tt.units); got != tt.want {
			t.Errorf("Format(%s, %d) = %q, want %q", tt.name, tt.units, got, tt.want)
		}
	}
}

func TestIndexRoundTrip(t *testing.T) {
	max := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("40"),
		corev1.ResourceMemory: resource.MustParse("40Gi"),
		gpu:                   resource.MustParse("4"),
		"example.com/foo":     resource.MustParse("1k"),
	}
	ix := IndexOf(max, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, corev1.ResourceList{"nodes": resource.MustParse("3")})
	if diff := cmp.Diff([]corev1.ResourceName{"cpu", "example.com/foo", "memory", "nodes", "nvidia.com/gpu"}, ix.Names()); diff != "" {
		t.Errorf("names sorted (-want +got):\n%s", diff)
	}
	limits := ix.Limits(max)
	if got, want := limits, (Vector{40000, 1000, 40 << 30, Unlimited, 4}); !got.Equal(want) {
		t.Errorf("Limits = %v, want %v", got, want)
	}
	if diff := cmp.Diff(max, ix.List(limits), quantityEqual); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	requests := ix.Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), "unknown.io/thing": resource.MustParse("7")})
	if want := (Vector{250, 0, 0, 0, 0}); !requests.Equal(want) {
		t.Errorf("Requests = %v, want %v (unknown resources dropped, missing ones zero)", requests, want)
	}
	pos, ok := ix.Position("nodes")
	if !ok || pos != 3 || ix.Name(pos) != "nodes" || ix.Len() != 5 {
		t.Errorf("Position(nodes) = %d, %v; Len = %d", pos, ok, ix.Len())
	}
	if _, ok := ix.Position("absent"); ok {
		t.Error("Position(absent) found")
	}
	if got := ix.Format(0, 1500); got != "1500m" {
		t.Errorf("Format(cpu, 1500) = %q", got)
	}
}

func TestVectorArithmeticSaturates(t *testing.T) {
	v := Vector{1, Unlimited - 1, 5, Unlimited}
	v.Add(Vector{1, 10, 0, 1})
	if want := (Vector{2, Unlimited, 5, Unlimited}); !v.Equal(want) {
		t.Errorf("Add = %v, want %v", v, want)
	}
	v.Sub(Vector{3, 1, 5, 1})
	if want := (Vector{0, Unlimited, 0, Unlimited}); !v.Equal(want) {
		t.Errorf("Sub = %v, want %v (floored at zero, unlimited stays)", v, want)
	}
	w := Vector{0, 0}
	w.AddScaled(Vector{3, math.MaxInt64 / 2}, 3)
	if want := (Vector{9, Unlimited}); !w.Equal(want) {
		t.Errorf("AddScaled = %v, want %v", w, want)
	}
	w.SubScaled(Vector{2, 1}, 4)
	if want := (Vector{1, Unlimited}); !w.Equal(want) {
		t.Errorf("SubScaled = %v, want %v", w, want)
	}
	if !(Vector{0, 0}).IsZero() || (Vector{0, 1}).IsZero() {
		t.Error("IsZero wrong")
	}
	if (Vector{1}).Equal(Vector{1, 2}) || (Vector{1, 2}).Equal(Vector{1, 3}) {
		t.Error("Equal wrong")
	}
}

func TestSaturatingHelpers(t *testing.T) {
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"add", SaturatingAdd(2, 3), 5},
		{"add overflow", SaturatingAdd(math.MaxInt64, 1), math.MaxInt64},
		{"add underflow", SaturatingAdd(math.MinInt64, -1), math.MinInt64},
		{"add negative", SaturatingAdd(5, -7), -2},
		{"sub", FlooredSub(5, 3), 2},
		{"sub floor", FlooredSub(3, 5), 0},
		{"sub unlimited", FlooredSub(Unlimited, 5), Unlimited},
		{"mul", SaturatingMul(6, 7), 42},
		{"mul overflow", SaturatingMul(math.MaxInt64/2, 3), math.MaxInt64},
		{"mul zero", SaturatingMul(0, 3), 0},
		{"mul negative", SaturatingMul(-1, 3), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestFitsAndExceeded(t *testing.T) {
	ix := NewIndex(corev1.ResourceMemory, corev1.ResourceCPU, corev1.ResourceCPU, gpu)
	limit := Vector{20000, 10 << 30, Unlimited}
	tests := []struct {
		name    string
		used    Vector
		request Vector
		want    []corev1.ResourceName
	}{
		{"fits exactly", Vector{15000, 0, 100}, Vector{5000, 10 << 30, 1}, nil},
		{"cpu over", Vector{20000, 0, 0}, Vector{5000, 0, 0}, []corev1.ResourceName{"cpu"}},
		{"both over, sorted", Vector{20000, 10 << 30, 0}, Vector{1, 1, 0}, []corev1.ResourceName{"cpu", "memory"}},
		{"already over but not asked", Vector{30000, 0, 0}, Vector{0, 1, 0}, nil},
		{"unlimited absorbs saturation", Vector{0, 0, Unlimited}, Vector{0, 0, Unlimited}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Exceeded(ix, tt.used, tt.request, limit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Exceeded (-want +got):\n%s", diff)
			}
			if fits := Fits(tt.used, tt.request, limit); fits != (len(tt.want) == 0) {
				t.Errorf("Fits = %v, want %v", fits, len(tt.want) == 0)
			}
		})
	}
}

func TestLoadDoesNotAllocate(t *testing.T) {
	ix := NewIndex(corev1.ResourceCPU, corev1.ResourceMemory, gpu)
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	dst := ix.Zero()
	used, limit := Vector{0, 0, 0}, ix.Limits(nil)
	if allocs := testing.AllocsPerRun(100, func() {
		ix.Load(dst, list, 0)
		if !Fits(used, dst, limit) {
			t.Fatal("does not fit an unlimited vector")
		}
	}); allocs != 0 {
		t.Errorf("Load+Fits allocates %v times per run, want 0", allocs)
	}
}

func TestPodRequests(t *testing.T) {
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: cpu("1")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: cpu("500m")}},
		},
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: cpu("250m")}},
			{Name: "big-init", Resources: corev1.ResourceRequirements{Requests: cpu("3")}},
		},
		Overhead: cpu("100m"),
	}}
	// Regular containers plus sidecar: 1.75; the plain init container runs
	// next to the sidecar: 3.25; the larger wins, then overhead is added.
	if diff := cmp.Diff(cpu("3350m"), PodRequests(pod), quantityEqual); diff != "" {
		t.Errorf("PodRequests (-want +got):\n%s", diff)
	}
}

func TestPodFinished(t *testing.T) {
	for phase, want := range map[corev1.PodPhase]bool{
		corev1.PodPending: false, corev1.PodRunning: false, corev1.PodUnknown: false, "": false,
		corev1.PodSucceeded: true, corev1.PodFailed: true,
	} {
		if got := PodFinished(&corev1.Pod{Status: corev1.PodStatus{Phase: phase}}); got != want {
			t.Errorf("phase %q: PodFinished = %v, want %v", phase, got, want)
		}
	}
}
