//go:build !unix

package core

import "time"

// processCPU is not measured here: the benchmarks report 0 cpu-s/op.
func processCPU() time.Duration { return 0 }
