package expander

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// errEmptyPriorities is separate from a YAML error so that the log tells an
// operator the ConfigMap exists but was left blank.
var errEmptyPriorities = errors.New("priority configuration is empty")

// priorityConfig is the parsed "priorities" value: tiers sorted from the highest
// priority down.
type priorityConfig struct {
	tiers []priorityTier
}

type priorityTier struct {
	priority int
	patterns []*regexp.Regexp
}

// parsePriorities reads upstream's format: a YAML map from an integer priority to
// a list of regular expressions matched, unanchored, against node group ids. For
// example:
//
//	10:
//	  - .*t2\.large.*
//	50:
//	  - .*m4\.4xlarge.*
//
// Unlike upstream, a priority listed twice is an error rather than one of the
// lists being dropped without a word, and so is a configuration with no
// expressions at all: both are mistakes an operator wants to hear about.
func parsePriorities(data string) (*priorityConfig, error) {
	if strings.TrimSpace(data) == "" {
		return nil, errEmptyPriorities
	}
	var raw map[int][]string
	if err := yaml.UnmarshalStrict([]byte(data), &raw); err != nil {
		return nil, fmt.Errorf("parsing priorities YAML: %w", err)
	}
	// Highest first, which is the order rank needs; it also makes the reported
	// error the same on every loop when several expressions are bad.
	prios := slices.Sorted(maps.Keys(raw))
	slices.Reverse(prios)
	config := &priorityConfig{tiers: make([]priorityTier, 0, len(raw))}
	total := 0
	for _, prio := range prios {
		exprs := raw[prio]
		tier := priorityTier{priority: prio, patterns: make([]*regexp.Regexp, 0, len(exprs))}
		for _, expr := range exprs {
			re, err := regexp.Compile(expr)
			if err != nil {
				return nil, fmt.Errorf("priority %d, expression %q: %w", prio, expr, err)
			}
			tier.patterns = append(tier.patterns, re)
		}
		total += len(tier.patterns)
		config.tiers = append(config.tiers, tier)
	}
	if total == 0 {
		return nil, errors.New("priority configuration lists no node group expressions")
	}
	return config, nil
}

// rank is the index of the highest tier with a pattern matching id, or
// len(tiers) when none does: a group the user did not mention comes after every
// group they did, whatever the sign of their priorities.
func (c *priorityConfig) rank(id string) int {
	for i, tier := range c.tiers {
		for _, re := range tier.patterns {
			if re.MatchString(id) {
				return i
			}
		}
	}
	return len(c.tiers)
}
