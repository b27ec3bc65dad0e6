package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/scheduler/webhook"
)

// WebhookConfigurationName is the ValidatingWebhookConfiguration localcluster
// registers for the scheduler's admission webhook.
const WebhookConfigurationName = "quotascale-localcluster-scheduler"

// webhookFailurePolicy is the chart's default (webhook.failurePolicy): an
// unreachable scheduler lets writes through, and the scheduler's own
// validation keeps the last valid tree in force.
const webhookFailurePolicy = admissionregistrationv1.Ignore

// webhookServer serves the scheduler's admission webhook to the API server, as
// the chart's scheduler Deployment does behind its Service. It runs while the
// scheduler runs: it judges with the running plugin, and answers 503 (the
// webhook is down) while the scheduler is stopped or SetWebhookAvailable(false).
type webhookServer struct {
	once     sync.Once
	startErr error

	reviewer  atomic.Pointer[reviewerBox]
	available atomic.Bool
}

type reviewerBox struct{ webhook.Reviewer }

func (w *webhookServer) current() webhook.Reviewer {
	if !w.available.Load() {
		return nil
	}
	if box := w.reviewer.Load(); box != nil {
		return box.Reviewer
	}
	return nil
}

func (w *webhookServer) setReviewer(r webhook.Reviewer) {
	if r == nil {
		w.reviewer.Store(nil)
		return
	}
	w.reviewer.Store(&reviewerBox{r})
}

// SetWebhookAvailable takes the scheduler's admission webhook away from the API
// server when false, while the scheduler keeps scheduling: writes it would
// refuse then get in (failurePolicy Ignore). True brings it back.
func (c *Cluster) SetWebhookAvailable(available bool) { c.scheduler.webhook.available.Store(available) }

// startWebhook serves the webhook on a loopback port with a self-signed
// certificate and registers it with the API server, once per cluster, then
// waits until the API server consults it.
func (c *Cluster) startWebhook(ctx context.Context) error {
	w := &c.scheduler.webhook
	w.once.Do(func() {
		w.available.Store(true)
		w.startErr = c.serveWebhook(ctx)
	})
	return w.startErr
}

func (c *Cluster) serveWebhook(ctx context.Context) error {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("webhook")
	go func() {
		if err := webhook.Serve(klog.NewContext(c.background, logger), ln, cert, webhook.Handler(c.scheduler.webhook.current)); err != nil {
			logger.Error(err, "The admission webhook stopped")
		}
	}()
	base := "https://" + ln.Addr().String()
	config := WebhookConfiguration(
		admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + webhook.TreePath), CABundle: certPEM},
		admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + webhook.ResizePath), CABundle: certPEM},
	)
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering the admission webhook: %w", err)
	}
	return nil
}

// WebhookConfiguration is the scheduler's ValidatingWebhookConfiguration, as
// the chart renders it, for the given client configurations.
func WebhookConfiguration(trees, resizes admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(name string, client admissionregistrationv1.WebhookClientConfig, rule admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            client,
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
			FailurePolicy:           ptr.To(webhookFailurePolicy),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}
	}
	rule := func(group, version, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		}}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook(webhook.TreeWebhookName, trees, rule(schedulingv1beta1.GroupName, schedulingv1beta1.SchemeGroupVersion.Version, "elasticquotatrees",
				admissionregistrationv1.Create, admissionregistrationv1.Update)),
			hook(webhook.ResizeWebhookName, resizes, rule("", "v1", "pods/resize", admissionregistrationv1.Update)),
		},
	}
}

// waitForWebhook returns once the API server refuses, through the webhook, a
// dry-run tree only the webhook refuses: from then on every write is checked.
func (c *Cluster) waitForWebhook(ctx context.Context) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": schedulingv1beta1.SchemeGroupVersion.String(), "kind": "ElasticQuotaTree",
		"metadata": map[string]any{"name": "localcluster-webhook-probe", "namespace": "default"},
		// Two nodes named alike: only the webhook checks that.
		"spec": map[string]any{"root": map[string]any{"name": "probe", "children": []any{
			map[string]any{"name": "probe", "namespaces": []any{"localcluster-webhook-probe"}}}}},
	}}
	trees := c.Dynamic.Resource(schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")).Namespace("default")
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = trees.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if last != nil && apierrors.IsForbidden(last) && strings.Contains(last.Error(), webhook.TreeWebhookName) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the API server does not consult the admission webhook yet (last answer: %v): %w", last, err)
	}
	return nil
}
