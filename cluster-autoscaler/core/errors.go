package core

import (
	"errors"

	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
)

// loopError is a loop's error with its type as upstream's errors_total
// counts it.
type loopError struct {
	kind string
	err  error
}

func (e *loopError) Error() string { return e.err.Error() }
func (e *loopError) Unwrap() error { return e.err }

func cloudProviderError(err error) error {
	return &loopError{kind: metrics.CloudProviderError, err: err}
}
func apiCallError(err error) error { return &loopError{kind: metrics.APICallError, err: err} }

// errorType is the type of a loop's error; an error of no known kind is
// internal, as upstream's default.
func errorType(err error) string {
	var le *loopError
	if errors.As(err, &le) {
		return le.kind
	}
	return metrics.InternalError
}
