package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/scheduler/webhook"
)

// checkChartWebhook: the chart's ValidatingWebhookConfiguration is the one
// localcluster registers (names, rules, failurePolicy, timeouts), points at the
// rendered Service on the paths the scheduler serves, and its caBundle signs
// the serving certificate the scheduler mounts, for the Service's DNS name.
func checkChartWebhook(t *testing.T, r *chartRendering, ns string, want chartWant) {
	t.Helper()
	vwc := r.find("ValidatingWebhookConfiguration", "quotascale-scheduler")
	if want.scheduler == nil || want.scheduler.Args.Webhook == nil {
		if vwc != nil {
			t.Error("the webhook is rendered, but should not be")
		}
		return
	}
	if vwc == nil {
		t.Fatal("no ValidatingWebhookConfiguration")
	}
	got := chartFromUnstructured[admissionregistrationv1.ValidatingWebhookConfiguration](t, vwc)
	local := localcluster.WebhookConfiguration(admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{})
	ignoreClient := cmpopts.IgnoreFields(admissionregistrationv1.ValidatingWebhook{}, "ClientConfig")
	if diff := cmp.Diff(local.Webhooks, got.Webhooks, ignoreClient); diff != "" {
		t.Errorf("webhooks differ from localcluster's (-localcluster +chart):\n%s", diff)
	}
	paths := map[string]string{webhook.TreeWebhookName: webhook.TreePath, webhook.ResizeWebhookName: webhook.ResizePath}
	const service = "quotascale-scheduler-webhook"
	if r.find("Service", service) == nil {
		t.Errorf("Service %s is not rendered", service)
	}
	secret := chartFromUnstructured[corev1.Secret](t, r.find("Secret", service+"-tls"))
	for _, h := range got.Webhooks {
		svc := h.ClientConfig.Service
		if svc == nil || svc.Name != service || svc.Namespace != ns || svc.Path == nil || *svc.Path != paths[h.Name] || svc.Port == nil || *svc.Port != 443 {
			t.Errorf("webhook %s: clientConfig %+v, want Service %s/%s port 443 path %s", h.Name, h.ClientConfig, ns, service, paths[h.Name])
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(h.ClientConfig.CABundle) {
			t.Errorf("webhook %s: caBundle holds no certificate", h.Name)
			continue
		}
		block, _ := pem.Decode(secret.Data["tls.crt"])
		if block == nil {
			t.Fatal("the webhook Secret's tls.crt is not PEM")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: service + "." + ns + ".svc"}); err != nil {
			t.Errorf("webhook %s: the serving certificate does not verify against caBundle for %s.%s.svc: %v", h.Name, service, ns, err)
		}
	}
}
