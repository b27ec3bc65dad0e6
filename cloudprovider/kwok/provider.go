package kwok

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/quotascale/quotascale/cloudprovider"
)

// ProviderName is the provider's --cloud-provider name.
const ProviderName = "kwok"

// Options configure a Provider or a Cloud.
type Options struct {
	// Client reaches the cluster that holds the state ConfigMap and the nodes.
	Client kubernetes.Interface
	// Config yields the node groups; it is re-read on every Refresh (provider)
	// or pass (cloud).
	Config ConfigSource
	// StateNamespace and StateName locate the state ConfigMap; they default to
	// DefaultStateNamespace and DefaultStateName.
	StateNamespace string
	StateName      string
	// Clock defaults to the real clock; tests inject a fake one.
	Clock clock.Clock
	// PollInterval is the time between the cloud backend's passes, 250ms by
	// default. The provider ignores it.
	PollInterval time.Duration
}

func (o *Options) complete() (*stateStore, error) {
	if o.Client == nil {
		return nil, fmt.Errorf("kwok: Options.Client is required")
	}
	if o.Config == nil {
		return nil, fmt.Errorf("kwok: Options.Config is required")
	}
	if o.StateNamespace == "" {
		o.StateNamespace = DefaultStateNamespace
	}
	if o.StateName == "" {
		o.StateName = DefaultStateName
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	return &stateStore{client: o.Client, namespace: o.StateNamespace, name: o.StateName}, nil
}

// Provider implements cloudprovider.CloudProvider on the kwok cloud.
type Provider struct {
	// ctx bounds the API calls of the NodeGroup methods, which take no context.
	ctx     context.Context
	source  ConfigSource
	store   *stateStore
	clock   clock.PassiveClock
	newName func(group string) string

	mu        sync.Mutex
	config    *compiled
	configErr error
	state     *cloudState
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// NewProvider loads the config, which must be valid, and the state. ctx bounds
// every API call the provider makes later; cancel it only on shutdown.
func NewProvider(ctx context.Context, opts Options) (*Provider, error) {
	store, err := opts.complete()
	if err != nil {
		return nil, err
	}
	p := &Provider{
		ctx:     ctx,
		source:  opts.Config,
		store:   store,
		clock:   opts.Clock,
		newName: func(group string) string { return group + "-" + utilrand.String(5) },
	}
	cfg, err := p.source.Load(ctx)
	if err != nil {
		return nil, err
	}
	if p.config, err = cfg.compile(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.source, err)
	}
	if p.state, err = p.store.read(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Provider) Name() string { return ProviderName }

// NodeGroups returns the configured groups, sorted by name.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, 0, len(p.config.names))
	for _, name := range p.config.names {
		out = append(out, &nodeGroup{p: p, name: name})
	}
	return out
}

// NodeGroupForNode finds the group by the node's provider ID; nodes that are not
// the kwok cloud's, or whose group is no longer configured, have none.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	group, _, ok := parseProviderID(node.Spec.ProviderID)
	if !ok {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.config.groups[group]; !ok {
		return nil, nil
	}
	return &nodeGroup{p: p, name: group}, nil
}

// GetResourceLimiter returns no limits: the kwok cloud is as large as asked.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return cloudprovider.NewResourceLimiter(nil, nil), nil
}

// Refresh re-reads the config and the state. An invalid config is logged and
// kept aside (see LastConfigError) while the last valid one stays in force, so
// that a typo in the config does not stop the autoscaler.
func (p *Provider) Refresh() error {
	logger := klog.FromContext(p.ctx).WithValues("cloudProvider", ProviderName)
	var compiledCfg *compiled
	cfg, err := p.source.Load(p.ctx)
	if err == nil {
		compiledCfg, err = cfg.compile()
	}
	if err != nil {
		logger.Error(err, "Keeping the last valid kwok cloud config", "source", p.source.String())
	}
	state, stateErr := p.store.read(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.configErr = err
	if compiledCfg != nil {
		p.config = compiledCfg
	}
	if stateErr != nil {
		return stateErr
	}
	p.state = state
	return nil
}

// LastConfigError is the error of the last config load, nil when it was valid.
func (p *Provider) LastConfigError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.configErr
}

// Cleanup has nothing to release.
func (p *Provider) Cleanup() error { return nil }

func (p *Provider) setState(st *cloudState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = st
}

// uniqueName picks an instance name not used by any instance of the cloud.
func (p *Provider) uniqueName(group string, taken map[string]bool) string {
	for {
		name := p.newName(group)
		if !taken[name] {
			taken[name] = true
			return name
		}
	}
}
