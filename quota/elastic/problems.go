package elastic

import (
	"fmt"
	"strings"
)

// Rule names a validation rule, so callers can count or filter problems
// without parsing messages.
type Rule string

// The rules a tree must satisfy. Every Problem carries one of these.
const (
	RuleEmptyName             Rule = "EmptyName"
	RuleDuplicateName         Rule = "DuplicateName"
	RuleNegativeQuantity      Rule = "NegativeQuantity"
	RuleMinExceedsMax         Rule = "MinExceedsMax"
	RuleChildrenMinExceedMin  Rule = "ChildrenMinExceedMin"
	RuleRootMinNotMax         Rule = "RootMinNotMax"
	RuleNamespacesOnInnerNode Rule = "NamespacesOnInnerNode"
	RuleNamespaceInManyNodes  Rule = "NamespaceInManyNodes"
	RuleNamespaceRepeated     Rule = "NamespaceRepeated"
	RuleInvalidNamespace      Rule = "InvalidNamespace"
	RuleTooDeep               Rule = "TooDeep"
	RuleInvalidResourceFlavor Rule = "InvalidResourceFlavor"
	// RuleInvalidDeviceClass: a min or max named like a device class
	// (<class>.deviceclass.resource.k8s.io/devices) whose class is not a
	// valid DeviceClass name, so no device could ever count under it.
	RuleInvalidDeviceClass Rule = "InvalidDeviceClass"
)

// Problem is one violated rule. Message is complete on its own (it names the
// node and the numbers) and is stable text that tests and people match on.
type Problem struct {
	// Node is the offending node's name, or its path when the name is empty;
	// empty for problems that belong to a namespace rather than one node.
	Node    string
	Rule    Rule
	Message string
}

// ValidationError lists every problem of a tree, sorted by message, so one
// status update tells the author everything that is wrong at once.
type ValidationError struct {
	// Object is the tree's namespace/name.
	Object   string
	Problems []Problem
}

// Message joins the problems with "; " for a status condition message.
func (e *ValidationError) Message() string {
	messages := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		messages = append(messages, p.Message)
	}
	return strings.Join(messages, "; ")
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("ElasticQuotaTree %s is invalid: %s", e.Object, e.Message())
}
