package resources

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Unlimited stands for "no ceiling". Because every comparison is
// used+request <= max with saturating addition, a max of Unlimited admits
// everything without a special case on the hot path.
const Unlimited int64 = math.MaxInt64

// saturationPoint is where conversion gives up on precision and saturates.
// It sits a little below math.MaxInt64 so that float rounding in the magnitude
// check can never let MilliValue or Value overflow and wrap.
const saturationPoint = 9e18

// IsMilli reports whether name is held in milli-units. Only cpu is: it is the
// one resource whose requests are routinely fractional.
func IsMilli(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU
}

// Units converts q into the integer units a Vector holds for name, rounding
// up. Negative quantities become zero (validation reports them before
// anything is converted) and quantities too large for int64 saturate to
// Unlimited, so a conversion can never wrap into a small or negative number.
func Units(name corev1.ResourceName, q resource.Quantity) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	milli := IsMilli(name)
	if whole, ok := q.AsInt64(); ok { // the common case: an integer in int64 range
		if !milli {
			return whole
		}
		if whole <= Unlimited/1000 {
			return whole * 1000
		}
		return Unlimited
	}
	magnitude := q.AsApproximateFloat64()
	if milli {
		magnitude *= 1000
	}
	if magnitude >= saturationPoint || math.IsNaN(magnitude) {
		return Unlimited
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

// Quantity converts units of name back into a canonical Quantity: cpu as a
// milli quantity (so 5000 prints as "5" and 500 as "500m"), byte-sized
// resources in binary SI when they are whole KiB (so 20Gi stays "20Gi"),
// everything else in decimal SI (so 1e9 bytes reads "1G", not "1000000000").
func Quantity(name corev1.ResourceName, units int64) resource.Quantity {
	if IsMilli(name) {
		return *resource.NewMilliQuantity(units, resource.DecimalSI)
	}
	if isByteSized(name) && units%1024 == 0 {
		return *resource.NewQuantity(units, resource.BinarySI)
	}
	return *resource.NewQuantity(units, resource.DecimalSI)
}

// Format renders units of name for people: the canonical quantity, or
// "unlimited" for the sentinel so a message never shows 9223372036854775807.
func Format(name corev1.ResourceName, units int64) string {
	if units == Unlimited {
		return "unlimited"
	}
	q := Quantity(name, units)
	return q.String()
}

func isByteSized(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}
