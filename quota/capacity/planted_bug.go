//go:build quotascale_plantedbug

package capacity

// plantedUpcomingMiss plants an off-by-one in the upcoming count: see
// planted.go. Never built into a program.
const plantedUpcomingMiss = 1
