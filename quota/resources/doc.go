// Package resources turns resource lists into dense int64 vectors so quota
// checks on hot paths are a few integer compares instead of map walks over
// resource.Quantity values.
//
// Units: cpu is held in millicores, every other resource in the unit of
// Quantity.Value() (bytes for memory, a count for nvidia.com/gpu, nodes and
// other extended resources). Quantities are rounded up when converted, so a
// request is never under-counted.
//
// Vectors never hold negative amounts. Arithmetic saturates instead of
// wrapping: Unlimited (math.MaxInt64) absorbs additions, which is also why a
// resource missing from a max can be represented by Unlimited and compared
// like any other number.
package resources
