package devices

import (
	"context"
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// DefaultFeatures are the CEL features Kubernetes 1.37 enables by default
// (DRAConsumableCapacity is beta and on, DRAListTypeAttributes alpha and off),
// so that a selector means here what it means to the scheduler.
var DefaultFeatures = cel.Features{EnableConsumableCapacity: true}

// compiledCacheSize is how many distinct expressions stay compiled: a cluster
// has a handful of classes, and claims mostly repeat their selectors.
const compiledCacheSize = 256

// Evaluator compiles and evaluates device selectors. It is safe for
// concurrent use; compiled expressions are cached.
type Evaluator struct {
	cache *cel.Cache
}

// NewEvaluator returns an evaluator for the given CEL features; most callers
// pass DefaultFeatures.
func NewEvaluator(features cel.Features) *Evaluator {
	return &Evaluator{cache: cel.NewCache(compiledCacheSize, features)}
}

// Device is one device a ResourceSlice publishes, with where it comes from.
type Device struct {
	Driver string
	Pool   string
	Device *resourcev1.Device
}

// ID is the device's name as allocation results spell it: driver/pool/device.
func (d Device) ID() string { return d.Driver + "/" + d.Pool + "/" + d.Device.Name }

// ErrSelector marks a selector that failed to compile or to evaluate: the
// device is then selected by nothing, as the scheduler's allocator refuses
// it, and the caller reports why.
var ErrSelector = errors.New("device selector failed")

// Matches reports whether every selector selects device, as the scheduler's
// allocator decides it: all CEL expressions must evaluate to true. A
// selector that fails to compile or evaluate returns false and an error that
// wraps ErrSelector and names the selector's position and the device. An
// empty list selects every device.
func (e *Evaluator) Matches(ctx context.Context, selectors []resourcev1.DeviceSelector, device Device) (bool, error) {
	for i, selector := range selectors {
		if selector.CEL == nil {
			// The API requires exactly one kind of selector and CEL is the only
			// one: a selector of a later kind is unknown, so selects nothing.
			return false, fmt.Errorf("%w: selector #%d is not a CEL selector", ErrSelector, i)
		}
		expr := e.cache.GetOrCompile(selector.CEL.Expression)
		if expr.Error != nil {
			return false, fmt.Errorf("%w: selector #%d: CEL compile error: %w", ErrSelector, i, expr.Error)
		}
		matches, _, err := expr.DeviceMatches(ctx, cel.Device{
			Driver:                   device.Driver,
			AllowMultipleAllocations: device.Device.AllowMultipleAllocations,
			Attributes:               device.Device.Attributes,
			Capacity:                 device.Device.Capacity,
		})
		if err != nil {
			return false, fmt.Errorf("%w: selector #%d on device %s: CEL runtime error: %w", ErrSelector, i, device.ID(), cel.EnhanceRuntimeError(err))
		}
		if !matches {
			return false, nil
		}
	}
	return true, nil
}
