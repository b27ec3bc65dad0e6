//go:build quotascale_plantedbug

package elastic

// plantedLeafOnly plants a child's usage not charged to its parent: see
// planted.go. Never built into a program.
const plantedLeafOnly = true
