package resources

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// Vector holds one amount per dimension of an Index. Its length is the
// Index's Len; mixing vectors of different indexes is a programming error.
type Vector []int64

// Add adds o into v, saturating at Unlimited.
func (v Vector) Add(o Vector) {
	for i, x := range o {
		v[i] = SaturatingAdd(v[i], x)
	}
}

// Sub subtracts o from v, flooring at zero: usage that would go negative
// means a bookkeeping mismatch, and a negative amount would silently grant
// headroom that does not exist.
func (v Vector) Sub(o Vector) {
	for i, x := range o {
		v[i] = FlooredSub(v[i], x)
	}
}

// AddScaled adds k copies of o into v, saturating.
func (v Vector) AddScaled(o Vector, k int64) {
	for i, x := range o {
		v[i] = SaturatingAdd(v[i], SaturatingMul(x, k))
	}
}

// SubScaled removes k copies of o from v, flooring at zero.
func (v Vector) SubScaled(o Vector, k int64) {
	for i, x := range o {
		v[i] = FlooredSub(v[i], SaturatingMul(x, k))
	}
}

// Equal reports whether v and o hold the same amounts.
func (v Vector) Equal(o Vector) bool {
	if len(v) != len(o) {
		return false
	}
	for i := range v {
		if v[i] != o[i] {
			return false
		}
	}
	return true
}

// IsZero reports whether every dimension is zero.
func (v Vector) IsZero() bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// Fits reports whether adding request to used stays within limit on every
// dimension the request asks for. A dimension the request does not ask for
// never blocks, even if used is already above limit: lowering a max must not
// refuse work that adds nothing to the exceeded resource.
func Fits(used, request, limit Vector) bool {
	for i, r := range request {
		if r > 0 && SaturatingAdd(used[i], r) > limit[i] {
			return false
		}
	}
	return true
}

// Exceeded names, sorted, the dimensions on which used+request goes past limit.
func Exceeded(ix *Index, used, request, limit Vector) []corev1.ResourceName {
	var names []corev1.ResourceName
	for i, r := range request {
		if r > 0 && SaturatingAdd(used[i], r) > limit[i] {
			names = append(names, ix.names[i])
		}
	}
	return names
}

// SaturatingAdd is a+b clamped to the int64 range instead of wrapping.
func SaturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// FlooredSub is a-b, never below zero. a == Unlimited stays Unlimited: an
// unbounded amount minus a bounded one is still unbounded.
func FlooredSub(a, b int64) int64 {
	if a == Unlimited {
		return Unlimited
	}
	if b >= a {
		return 0
	}
	return a - b
}

// SaturatingMul is a*k for non-negative operands, saturating at Unlimited;
// negative operands yield zero because vectors never hold negative amounts.
func SaturatingMul(a, k int64) int64 {
	if a <= 0 || k <= 0 {
		return 0
	}
	if a > math.MaxInt64/k {
		return math.MaxInt64
	}
	return a * k
}
