package capacityscheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestReviewTree(t *testing.T) {
	h := newHarness(t, world{flavors: []*kueuev1beta1.ResourceFlavor{flavor("spot", map[string]string{"pool": "spot"})}})
	// gone names ResourceFlavor "gpu", which does not exist (deleted since the
	// tree was admitted, say).
	const gone = `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a, attributes: {resourceflavors: gpu}, children: [{name: a.1, namespaces: [a]}]}]}`
	tests := []struct {
		name string
		// old is the tree before an update; empty for a create.
		old, tree, want string
	}{
		{"valid, with a flavor that exists", "", `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a, namespaces: [a], attributes: {resourceflavors: spot}}]}`, ""},
		{"a flavor that does not exist", "", gone,
			`ElasticQuotaTree team/draft is invalid: quota node "a": ResourceFlavor "gpu" does not exist`},
		{"every problem at once, sorted", "", `
root: {name: root, min: {cpu: 4}, max: {cpu: 8}, children: [
  {name: a, namespaces: [shared], attributes: {resourceflavors: gpu}},
  {name: b, namespaces: [shared], min: {cpu: 5}}]}`,
			`ElasticQuotaTree team/draft is invalid: namespace "shared" is listed by more than one quota node: "a", "b"; ` +
				`quota node "a": ResourceFlavor "gpu" does not exist; ` +
				`quota node "root": root min cpu 4 differs from max cpu 8; ` +
				`quota node "root": sum of children's min cpu 5 exceeds min cpu 4`},
		{"an update that keeps a missing flavor where it was", gone, `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a, max: {cpu: 2}, attributes: {resourceflavors: gpu}, children: [{name: a.1, namespaces: [a, a2]}]}]}`, ""},
		{"an update that names the missing flavor on another node", gone, `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a, attributes: {resourceflavors: gpu}, children: [{name: a.1, namespaces: [a]}]},
  {name: b, namespaces: [b], attributes: {resourceflavors: gpu}}]}`,
			`ElasticQuotaTree team/draft is invalid: quota node "b": ResourceFlavor "gpu" does not exist`},
		{"an update that renames the node naming the missing flavor", gone, `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a-renamed, attributes: {resourceflavors: gpu}, children: [{name: a.1, namespaces: [a]}]}]}`,
			`ElasticQuotaTree team/draft is invalid: quota node "a-renamed": ResourceFlavor "gpu" does not exist`},
		{"an update that points the node at another missing flavor", gone, `
root: {name: root, min: {cpu: 4}, max: {cpu: 4}, children: [
  {name: a, attributes: {resourceflavors: tpu}, children: [{name: a.1, namespaces: [a]}]}]}`,
			`ElasticQuotaTree team/draft is invalid: quota node "a": ResourceFlavor "tpu" does not exist`},
		{"an update that keeps the missing flavor still obeys the library's rules", gone, `
root: {name: root, min: {cpu: 4}, max: {cpu: 8}, children: [
  {name: a, attributes: {resourceflavors: gpu}, children: [{name: a.1, namespaces: [a]}]}]}`,
			`ElasticQuotaTree team/draft is invalid: quota node "root": root min cpu 4 differs from max cpu 8`},
	}
	decode := func(t *testing.T, spec string) *schedulingv1beta1.ElasticQuotaTree {
		t.Helper()
		tree := &schedulingv1beta1.ElasticQuotaTree{}
		if err := yaml.UnmarshalStrict([]byte(spec), &tree.Spec); err != nil {
			t.Fatal(err)
		}
		tree.Namespace, tree.Name = "team", "draft"
		return tree
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old *schedulingv1beta1.ElasticQuotaTree
			if tt.old != "" {
				old = decode(t, tt.old)
			}
			got := ""
			if err := h.plugin.ReviewTree(h.ctx, old, decode(t, tt.tree)); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("ReviewTree:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestReviewResize(t *testing.T) {
	bound := testPod("p", "team-a", "4", "n1", low, 0)
	pending := testPod("pending", "team-a", "4", "", low, 0)
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}, pods: []*corev1.Pod{
		bound, pending, testPod("b", "team-b", "8", "n1", low, 0),
	}})
	resized := func(p *corev1.Pod, requests corev1.ResourceList) *corev1.Pod {
		out := p.DeepCopy()
		out.Spec.Containers[0].Resources.Requests = requests
		return out
	}
	memory := cpuList("10")
	memory[corev1.ResourceMemory] = resource.MustParse("64Gi")
	tests := []struct {
		name string
		old  *corev1.Pod
		new  *corev1.Pod
		want string
	}{
		// root: 12 of 16 used.
		{"within max", bound, resized(bound, cpuList("8")), ""},
		{"past the root's max", bound, resized(bound, cpuList("10")),
			`resizing pod team-a/p from cpu 4 to cpu 10 adds cpu 6, which its quota does not admit: exceeded elastic quota "root": cpu used 12, requested 6, max 16`},
		{"every raised resource is named; unlimited ones pass", bound, resized(bound, memory),
			`resizing pod team-a/p from cpu 4, memory 0 to cpu 10, memory 64Gi adds cpu 6, memory 64Gi, which its quota does not admit: exceeded elastic quota "root": cpu used 12, requested 6, max 16`},
		{"shrinking", bound, resized(bound, cpuList("1")), ""},
		{"a pod not charged yet is judged when scheduled", pending, resized(pending, cpuList("100")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := h.plugin.ReviewResize(h.ctx, tt.old, tt.new); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("ReviewResize:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
