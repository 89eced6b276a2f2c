// Package ipam owns Beacon's address-management domain: the types (pools,
// allocations, address claims, holds, audit records), the rules that decide
// which pool serves an owner and when owners may share an address, the
// sentinel errors every layer above reports, and the description of a storage
// change (Change) that the storage layer commits atomically.
//
// It imports no transport and no storage: the gRPC layer translates to and
// from these types, and the store encodes them.
package ipam
