package expander

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"k8s.io/klog/v2"
)

// priority keeps the options whose node group matches the highest priority in the
// user's ConfigMap. It reads the ConfigMap on every decision, as upstream does, so
// that an external optimiser can steer scale-ups by editing it; parsing is cached
// by content because the data rarely changes between loops.
//
// When the configuration is missing or malformed it keeps every option and says
// so once per decision: a broken ConfigMap must not block scale-ups, and later
// stages of the chain still get to choose (upstream has behaved this way since
// kubernetes/autoscaler#5246).
type priority struct {
	source func() (string, bool, error)
	logger klog.Logger

	mu        sync.Mutex
	hasCached bool
	data      string
	config    *priorityConfig
	err       error
}

func (p *priority) BestOptions(options []Option) []Option {
	if len(options) == 0 {
		return nil
	}
	config, err := p.current()
	if err != nil {
		p.logger.Error(err, "Priority expander configuration unusable, keeping every option",
			"configMap", PriorityConfigMapName, "options", len(options))
		return slices.Clone(options)
	}
	ranks := make([]int, len(options))
	for i := range options {
		ranks[i] = config.rank(groupID(&options[i]))
	}
	return pick(options, bestIndices(len(options), func(i, j int) int {
		return cmp.Compare(ranks[j], ranks[i]) // a lower rank is a higher priority
	}))
}

func (p *priority) current() (*priorityConfig, error) {
	data, found, err := p.source()
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", PriorityConfigMapName, err)
	}
	if !found {
		return nil, fmt.Errorf("ConfigMap %s, or its %q key, not found", PriorityConfigMapName, PriorityConfigMapKey)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hasCached || data != p.data {
		p.config, p.err = parsePriorities(data)
		p.data, p.hasCached = data, true
	}
	if p.err != nil {
		return nil, fmt.Errorf("ConfigMap %s key %q: %w", PriorityConfigMapName, PriorityConfigMapKey, p.err)
	}
	return p.config, nil
}
