//go:build !quotascale_plantedbug

package elastic

// plantedLeafOnly is false: a pod's requests are charged to its leaf and every
// ancestor. Built with -tags quotascale_plantedbug (planted_bug.go), children's
// usage is not charged to their parents, for the test that shows test/oracle
// catches such a bug (TestOracleCatchesPlantedBug).
const plantedLeafOnly = false
