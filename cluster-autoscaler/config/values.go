package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
)

// rangeValue parses upstream's <min>:<max> flags (--cores-total,
// --memory-total) into two options, in units of unit (1 for cores, 1 GiB for
// memory). Upstream registers them as strings, so the type is "string".
type rangeValue struct {
	min, max *int64
	unit     int64
}

func (r *rangeValue) String() string {
	if r.min == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", *r.min/r.unit, *r.max/r.unit)
}

// Set writes both bounds or, on any error, neither. A bound whose value in
// bytes would not fit an int64 is refused: wrapped around, it would turn the
// cluster-wide limit negative and void it.
func (r *rangeValue) Set(s string) error {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%q is not <min>:<max>", s)
	}
	minV, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	if err != nil {
		return fmt.Errorf("%q: min is not an integer", s)
	}
	maxV, err := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	if err != nil {
		return fmt.Errorf("%q: max is not an integer", s)
	}
	if minV < 0 || maxV < minV {
		return fmt.Errorf("%q: want 0 <= min <= max", s)
	}
	if limit := math.MaxInt64 / r.unit; maxV > limit {
		return fmt.Errorf("%q: max is above %d", s, limit)
	}
	*r.min, *r.max = minV*r.unit, maxV*r.unit
	return nil
}

func (r *rangeValue) Type() string { return "string" }

// cidrsValue is the type of the GCE provider's firewall range flags: a
// comma-separated list of CIDRs, printed sorted. As upstream's, it may be set
// once; that replaces the default.
type cidrsValue struct {
	cidrs []string
	set   bool
}

func parseCIDRs(s string) (*cidrsValue, error) {
	v := &cidrsValue{}
	for _, c := range strings.Split(s, ",") {
		_, ipNet, err := net.ParseCIDR(strings.TrimSpace(c))
		if err != nil {
			return nil, err
		}
		v.cidrs = append(v.cidrs, ipNet.String())
	}
	slices.Sort(v.cidrs)
	return v, nil
}

func (c *cidrsValue) String() string { return strings.Join(c.cidrs, ",") }

func (c *cidrsValue) Set(s string) error {
	if c.set {
		return fmt.Errorf("set more than once")
	}
	v, err := parseCIDRs(s)
	if err != nil {
		return err
	}
	*c = cidrsValue{cidrs: v.cidrs, set: true}
	return nil
}

func (c *cidrsValue) Type() string { return "cidrs" }
