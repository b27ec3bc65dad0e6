package expander

import "cmp"

// mostPods keeps the options that would schedule the most pending pods.
type mostPods struct{}

func (mostPods) BestOptions(options []Option) []Option {
	return pick(options, bestIndices(len(options), func(i, j int) int {
		return cmp.Compare(len(options[i].Pods), len(options[j].Pods))
	}))
}
