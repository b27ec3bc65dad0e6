package expander

import (
	"math/rand/v2"
	"sync"
)

// random keeps one option, uniformly. It is a Filter like the others so that it
// can close a chain; a one-element result ends the chain's tie-breaking.
type random struct {
	// mu guards r: *rand.Rand is not safe for concurrent use, and a Strategy may be
	// shared by goroutines.
	mu sync.Mutex
	r  *rand.Rand
}

func (s *random) BestOptions(options []Option) []Option {
	if len(options) == 0 {
		return nil
	}
	s.mu.Lock()
	i := s.r.IntN(len(options))
	s.mu.Unlock()
	return pick(options, []int{i})
}
