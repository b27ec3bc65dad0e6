package kwok

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/quotascale/quotascale/cloudprovider"
)

// start is the fake clock's start; instance records carry times from it.
var start = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const fixtureConfig = `
nodeGroups:
- name: general
  minSize: 1
  maxSize: 5
  labels: {cloud.google.com/machine-family: n2}
  taints: [{key: dedicated, value: batch, effect: NoSchedule}]
  capacity: {cpu: "4", memory: 16Gi}
  allocatable: {cpu: 3900m}
  provisioningDelay: 2s
- name: scarce
  maxSize: 10
  capacity: {cpu: "2", memory: 8Gi}
  provisioningDelay: 1s
  failures: {outOfResources: true, errorCode: ZONE_RESOURCE_POOL_EXHAUSTED, message: no n2 left, failAfter: 1}
`

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	clock    *clocktesting.FakeClock
	source   *StaticSource
	provider *Provider
	cloud    *Cloud
	counter  int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, err := ParseConfig([]byte(fixtureConfig))
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(), clock: clocktesting.NewFakeClock(start)}
	if f.source, err = NewStaticSource(cfg); err != nil {
		t.Fatal(err)
	}
	f.provider = f.newProvider()
	if f.cloud, err = NewCloud(f.ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) options() Options {
	return Options{Client: f.client, Config: f.source, Clock: f.clock}
}

// newProvider is an autoscaler (re)starting; instance names are predictable.
func (f *fixture) newProvider() *Provider {
	f.t.Helper()
	p, err := NewProvider(f.ctx, f.options())
	if err != nil {
		f.t.Fatal(err)
	}
	p.newName = func(group string) string {
		f.counter++
		return fmt.Sprintf("%s-%05d", group, f.counter)
	}
	return p
}

func (f *fixture) group(name string) cloudprovider.NodeGroup {
	f.t.Helper()
	for _, g := range f.provider.NodeGroups() {
		if g.Id() == name {
			return g
		}
	}
	f.t.Fatalf("no node group %s", name)
	return nil
}

func (f *fixture) reconcile() {
	f.t.Helper()
	if err := f.cloud.Reconcile(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	if err := f.provider.Refresh(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) nodeNames() []string {
	f.t.Helper()
	nodes, err := f.client.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}

func (f *fixture) stateData() map[string]string {
	f.t.Helper()
	cm, err := f.client.CoreV1().ConfigMaps(DefaultStateNamespace).Get(f.ctx, DefaultStateName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return cm.Data
}

// instances summarises Nodes() as "id state [class code message]".
func instances(t *testing.T, g cloudprovider.NodeGroup) []string {
	t.Helper()
	list, err := g.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, in := range list {
		s := in.Id + " " + in.Status.State.String()
		if e := in.Status.ErrorInfo; e != nil {
			s += fmt.Sprintf(" class=%d %s %q", e.ErrorClass, e.ErrorCode, e.ErrorMessage)
		}
		out = append(out, s)
	}
	return out
}

func nodeWithProviderID(id string) *corev1.Node {
	_, name, _ := parseProviderID(id)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: id}}
}
