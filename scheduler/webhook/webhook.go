// Package webhook serves the scheduler's validating admission webhook: the
// ElasticQuotaTree rules the CRD's CEL cannot afford, and in-place pod resizes
// (pods/resize) that would take a quota node past its max. It speaks
// admission.k8s.io/v1 over HTTPS and leaves every decision to a Reviewer, the
// CapacityScheduling plugin, so the webhook judges with the scheduler's own
// tree, usage and ResourceFlavors.
package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// The paths the ValidatingWebhookConfiguration points at, and the names of
// its two webhooks, which the API server puts in every refusal:
//
//	admission webhook "elasticquotatree.quotascale.io" denied the request: ...
const (
	TreePath   = "/validate-elasticquotatree"
	ResizePath = "/validate-pod-resize"

	TreeWebhookName   = "elasticquotatree.quotascale.io"
	ResizeWebhookName = "podresize.quotascale.io"
)

// Reviewer decides. A nil error admits; an error's text is the refusal the API
// server returns to the writer.
type Reviewer interface {
	// ReviewTree judges a created tree (old is nil) or an update whose spec
	// differs from old's. Problems old already had with objects outside the
	// tree, such as a ResourceFlavor deleted since, are ratcheted: they refuse
	// only an update that adds them.
	ReviewTree(ctx context.Context, old, tree *schedulingv1beta1.ElasticQuotaTree) error
	ReviewResize(ctx context.Context, old, resized *corev1.Pod) error
}

// maxReviewBytes bounds a request body: an AdmissionReview carries the object
// twice (old and new), and the API server limits an object to 3 MiB.
const maxReviewBytes = 7 << 20

// Handler serves both webhooks. reviewer is called per request, so a caller
// can swap the plugin behind it (a scheduler restarted in one process); a nil
// Reviewer answers 503, which the API server treats as the webhook being down.
func Handler(reviewer func() Reviewer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(TreePath, func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, reviewer, func(ctx context.Context, rv Reviewer, req *admissionv1.AdmissionRequest) error {
			var tree schedulingv1beta1.ElasticQuotaTree
			if err := json.Unmarshal(req.Object.Raw, &tree); err != nil {
				return fmt.Errorf("decoding ElasticQuotaTree %s/%s: %w", req.Namespace, req.Name, err)
			}
			if req.Operation != admissionv1.Update {
				return rv.ReviewTree(ctx, nil, &tree)
			}
			var old schedulingv1beta1.ElasticQuotaTree
			if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
				return fmt.Errorf("decoding ElasticQuotaTree %s/%s before the update: %w", req.Namespace, req.Name, err)
			}
			if apiequality.Semantic.DeepEqual(old.Spec, tree.Spec) {
				// Labels, annotations, finalizers, owner references, a re-apply
				// of the same spec: nothing the tree's rules judge changed, and
				// refusing would block the garbage collector and every
				// controller that only touches metadata.
				return nil
			}
			return rv.ReviewTree(ctx, &old, &tree)
		})
	})
	mux.HandleFunc(ResizePath, func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, reviewer, func(ctx context.Context, rv Reviewer, req *admissionv1.AdmissionRequest) error {
			var old, resized corev1.Pod
			if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
				return fmt.Errorf("decoding the pod %s/%s before its resize: %w", req.Namespace, req.Name, err)
			}
			if err := json.Unmarshal(req.Object.Raw, &resized); err != nil {
				return fmt.Errorf("decoding the resized pod %s/%s: %w", req.Namespace, req.Name, err)
			}
			return rv.ReviewResize(ctx, &old, &resized)
		})
	})
	return mux
}

func serve(w http.ResponseWriter, r *http.Request, reviewer func() Reviewer,
	review func(context.Context, Reviewer, *admissionv1.AdmissionRequest) error) {
	logger := klog.FromContext(r.Context())
	rv := reviewer()
	if rv == nil {
		http.Error(w, "the scheduler is not ready to review", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
	if err := review(r.Context(), rv, in.Request); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: metav1.StatusReasonForbidden, Message: err.Error()}
		logger.V(2).Info("Refused at admission", "kind", in.Request.Kind.Kind, "object", klog.KRef(in.Request.Namespace, in.Request.Name), "reason", err.Error())
	}
	out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp}
	out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		logger.Error(err, "Writing an admission response")
	}
}

// Serve serves h over TLS on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, cert tls.Certificate, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the admission webhook on %s: %w", ln.Addr(), err)
	}
	return nil
}
