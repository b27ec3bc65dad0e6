package expander

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRandom(t *testing.T) {
	options := []Option{withPods("a", 1), withPods("b", 1), withPods("c", 1)}

	t.Run("no options", func(t *testing.T) {
		s := &random{r: rand.New(rand.NewPCG(1, 2))}
		if got := s.BestOptions(nil); got != nil {
			t.Errorf("BestOptions(nil) = %v, want nil", ids(got))
		}
	})

	t.Run("keeps exactly one option", func(t *testing.T) {
		s := &random{r: rand.New(rand.NewPCG(1, 2))}
		for range 20 {
			if got := s.BestOptions(options); len(got) != 1 {
				t.Fatalf("BestOptions() kept %v, want one option", ids(got))
			}
		}
	})

	t.Run("same seed, same choices", func(t *testing.T) {
		draw := func() []string {
			s := &random{r: rand.New(rand.NewPCG(7, 11))}
			var out []string
			for range 50 {
				out = append(out, ids(s.BestOptions(options))...)
			}
			return out
		}
		if diff := cmp.Diff(draw(), draw()); diff != "" {
			t.Errorf("two runs with one seed differ (-first +second):\n%s", diff)
		}
	})

	t.Run("uniform", func(t *testing.T) {
		s := &random{r: rand.New(rand.NewPCG(3, 5))}
		const draws = 3000
		counts := map[string]int{}
		for range draws {
			counts[ids(s.BestOptions(options))[0]]++
		}
		// Each share is 1000 ± 5 standard deviations (~26 each).
		for _, id := range []string{"a", "b", "c"} {
			if c := counts[id]; c < 870 || c > 1130 {
				t.Errorf("option %s chosen %d times out of %d, want about %d", id, c, draws, draws/3)
			}
		}
	})
}
