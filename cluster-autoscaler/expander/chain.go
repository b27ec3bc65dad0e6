package expander

// chain runs its filters in order and settles what they leave tied.
type chain struct {
	filters []Filter
}

func (c *chain) BestOption(options []Option) *Option {
	remaining := options
	for _, f := range c.filters {
		if len(remaining) <= 1 {
			break
		}
		remaining = f.BestOptions(remaining)
	}
	if len(remaining) == 0 {
		return nil
	}
	best := 0
	for i := 1; i < len(remaining); i++ {
		if groupID(&remaining[i]) < groupID(&remaining[best]) {
			best = i
		}
	}
	chosen := remaining[best]
	return &chosen
}
