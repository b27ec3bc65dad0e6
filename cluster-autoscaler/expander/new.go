package expander

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// ErrUnknownExpander is returned by New for a name it does not know.
var ErrUnknownExpander = errors.New("unknown expander")

// validNames is sorted so the error message reads the same every time.
var validNames = []string{LeastWasteExpanderName, MostPodsExpanderName, PriorityBasedExpanderName, RandomExpanderName}

// DefaultExpander is what an empty --expander means.
const DefaultExpander = LeastWasteExpanderName

// New builds the chain from a comma-separated --expander value, e.g.
// "priority,least-waste": each filter narrows in turn; the last stage breaks remaining ties.
// Ties after the whole chain go to the node group Id that sorts first, unless the
// last stage is "random". An empty spec means least-waste.
//
// As upstream, a name may appear once, and nothing may follow "random": it always
// leaves a single option, so a later stage would silently never run.
func New(ctx context.Context, spec string, deps Deps) (Strategy, error) {
	names := splitSpec(spec)
	for _, name := range names {
		if !isValidName(name) {
			return nil, fmt.Errorf("%w %q: valid expanders are %s", ErrUnknownExpander, name, strings.Join(validNames, ", "))
		}
	}
	seen := make(map[string]bool, len(names))
	filters := make([]Filter, 0, len(names))
	for i, name := range names {
		if seen[name] {
			return nil, fmt.Errorf("expander %q appears twice in %q: each expander may be listed once", name, spec)
		}
		seen[name] = true
		if i > 0 && names[i-1] == RandomExpanderName {
			return nil, fmt.Errorf("expander %q follows %q in %q and would never run: %s always leaves one option",
				name, RandomExpanderName, spec, RandomExpanderName)
		}
		f, err := newStage(ctx, name, deps)
		if err != nil {
			return nil, err
		}
		filters = append(filters, f)
	}
	return &chain{filters: filters}, nil
}

func splitSpec(spec string) []string {
	if strings.TrimSpace(spec) == "" {
		return []string{DefaultExpander}
	}
	names := strings.Split(spec, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	return names
}

func isValidName(name string) bool {
	for _, v := range validNames {
		if name == v {
			return true
		}
	}
	return false
}

func newStage(ctx context.Context, name string, deps Deps) (Filter, error) {
	switch name {
	case RandomExpanderName:
		r := deps.Rand
		if r == nil {
			seed := uint64(time.Now().UnixNano())
			r = rand.New(rand.NewPCG(seed, seed>>32))
		}
		return &random{r: r}, nil
	case MostPodsExpanderName:
		return mostPods{}, nil
	case LeastWasteExpanderName:
		return leastWaste{}, nil
	default: // PriorityBasedExpanderName; New has already rejected unknown names.
		if deps.PriorityConfig == nil {
			return nil, fmt.Errorf("expander %q needs Deps.PriorityConfig to read ConfigMap %s", name, PriorityConfigMapName)
		}
		return &priority{source: deps.PriorityConfig, logger: klog.FromContext(ctx)}, nil
	}
}
