package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// recorder refuses trees named "bad" and resizes of pods named "big", and
// records what it was asked.
type recorder struct{ asked []string }

func (r *recorder) ReviewTree(_ context.Context, old, tree *schedulingv1beta1.ElasticQuotaTree) error {
	asked := "tree " + tree.Namespace + "/" + tree.Name + " root " + tree.Spec.Root.Name
	if old != nil {
		asked += " was " + old.Spec.Root.Name
	}
	r.asked = append(r.asked, asked)
	if tree.Name == "bad" {
		return errors.New("quota node \"root\": root min cpu 4 differs from max cpu 8")
	}
	return nil
}

func (r *recorder) ReviewResize(_ context.Context, old, resized *corev1.Pod) error {
	container := ""
	if len(resized.Spec.Containers) > 0 {
		container = resized.Spec.Containers[0].Name
	}
	r.asked = append(r.asked, "resize "+old.Name+" "+container)
	if resized.Name == "big" {
		return errors.New("too big")
	}
	return nil
}

// review is an AdmissionReview of a CREATE of obj, or of an UPDATE from old
// when old is not nil.
func review(t *testing.T, obj, old any) []byte {
	t.Helper()
	raw := func(v any) runtime.RawExtension {
		if v == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	op := admissionv1.Create
	if old != nil {
		op = admissionv1.Update
	}
	in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "req-1", Operation: op, Object: raw(obj), OldObject: raw(old)}}
	in.APIVersion, in.Kind = "admission.k8s.io/v1", "AdmissionReview"
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandler(t *testing.T) {
	tree := func(name string) *schedulingv1beta1.ElasticQuotaTree {
		tr := &schedulingv1beta1.ElasticQuotaTree{Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: schedulingv1beta1.ElasticQuotaSpec{Name: "root"}}}
		tr.Namespace, tr.Name = "kube-system", name
		return tr
	}
	// labelled is tree("bad") with a label: a metadata-only update.
	labelled := tree("bad")
	labelled.Labels = map[string]string{"team": "a"}
	labelled.Finalizers = []string{"foregroundDeletion"}
	// edited is tree("bad") with a child: its spec changed.
	edited := tree("bad")
	edited.Spec.Root.Children = []schedulingv1beta1.ElasticQuotaSpec{{Name: "a"}}
	// requantified writes the same quantity another way: not a change.
	before, after := tree("bad"), tree("bad")
	before.Spec.Root.Max = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	after.Spec.Root.Max = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		p.Name = name
		return p
	}
	type result struct {
		HTTP    int
		UID     string
		Allowed bool
		Code    int32
		Message string
	}
	tests := []struct {
		name, path string
		body       []byte
		reviewer   bool
		want       result
		asked      []string
	}{
		{"a valid tree", TreePath, review(t, tree("good"), nil), true, result{200, "req-1", true, 0, ""}, []string{"tree kube-system/good root root"}},
		{"an invalid tree", TreePath, review(t, tree("bad"), nil), true,
			result{200, "req-1", false, 403, `quota node "root": root min cpu 4 differs from max cpu 8`}, []string{"tree kube-system/bad root root"}},
		{"an update that only labels the tree and adds a finalizer is not reviewed", TreePath, review(t, labelled, tree("bad")), true,
			result{200, "req-1", true, 0, ""}, nil},
		{"an update that writes the same quantities another way is not reviewed", TreePath, review(t, after, before), true,
			result{200, "req-1", true, 0, ""}, nil},
		{"an update that changes the spec is reviewed, with the old tree", TreePath, review(t, edited, tree("good")), true,
			result{200, "req-1", false, 403, `quota node "root": root min cpu 4 differs from max cpu 8`}, []string{"tree kube-system/bad root root was root"}},
		{"an update whose old object does not decode", TreePath, review(t, tree("good"), map[string]any{"spec": "root"}), true,
			result{200, "req-1", false, 403, "decoding ElasticQuotaTree / before the update: json: cannot unmarshal string into Go struct field ElasticQuotaTree.spec of type v1beta1.ElasticQuotaTreeSpec"}, nil},
		{"a resize", ResizePath, review(t, pod("small"), pod("small")), true, result{200, "req-1", true, 0, ""}, []string{"resize small c"}},
		{"a refused resize", ResizePath, review(t, pod("big"), pod("big")), true, result{200, "req-1", false, 403, "too big"}, []string{"resize big c"}},
		{"no scheduler behind it", TreePath, review(t, tree("good"), nil), false, result{HTTP: 503}, nil},
		{"not an AdmissionReview", TreePath, []byte(`{"kind":"Pod"}`), true, result{HTTP: 400}, nil},
		{"an object that does not decode", TreePath, review(t, map[string]any{"spec": "root"}, nil), true,
			result{200, "req-1", false, 403, "decoding ElasticQuotaTree /: json: cannot unmarshal string into Go struct field ElasticQuotaTree.spec of type v1beta1.ElasticQuotaTreeSpec"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			h := Handler(func() Reviewer {
				if tt.reviewer {
					return rec
				}
				return nil
			})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, tt.path, bytes.NewReader(tt.body)))
			got := result{HTTP: w.Code}
			if w.Code == http.StatusOK {
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
					t.Fatal(err)
				}
				if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
					t.Errorf("response is a %s %s", out.APIVersion, out.Kind)
				}
				got.UID, got.Allowed = string(out.Response.UID), out.Response.Allowed
				if r := out.Response.Result; r != nil {
					got.Code, got.Message = r.Code, r.Message
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.asked, rec.asked); diff != "" {
				t.Errorf("reviews (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzHandler: whatever the API server (or anyone reaching the port) sends,
// the handler answers with a status and never panics.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"1","object":{"spec":{"root":{"name":"r","children":[{"name":"c"}]}}}}}`), true)
	f.Add([]byte(`{"request":{"uid":"1","object":{"spec":{"containers":[{"name":"c"}]}},"oldObject":null}}`), false)
	f.Add([]byte(`{"request":{"uid":"1","operation":"UPDATE","object":{"spec":{"root":{"name":"r"}}},"oldObject":{"spec":{"root":{"name":"r","max":{"cpu":"1"}}}}}}`), true)
	f.Add([]byte(`{"request":{"uid":"1","operation":"UPDATE","object":{"spec":{"root":{"name":"r"}}},"oldObject":7}}`), true)
	f.Add([]byte(`{"request":null}`), true)
	f.Fuzz(func(t *testing.T, body []byte, tree bool) {
		path := ResizePath
		if tree {
			path = TreePath
		}
		w := httptest.NewRecorder()
		Handler(func() Reviewer { return &recorder{} }).ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
