//go:build !quotascale_plantedbug

package capacity

// plantedUpcomingMiss is how many of a node group's upcoming nodes SetUpcoming
// leaves out: none. Built with -tags quotascale_plantedbug (planted_bug.go),
// the package miscounts by one, for the test that shows test/oracle catches
// such a bug (TestOracleCatchesPlantedBug).
const plantedUpcomingMiss = 0
