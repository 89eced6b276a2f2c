// Package store keeps the IPAM's state in etcd. It is the only package that
// imports etcd: it owns the key layout, the encoding of stored objects, the
// group committer that packs concurrent changes into one transaction, the
// state watch that feeds every replica's index, and the embedded etcd server
// used when no endpoints are configured.
//
// Key layout (prefix /beacon/v1/):
//
//	state/pools/{pool}
//	state/allocs/{tenant}/{allocation}
//	state/claims/4/{8 hex digits}    one per claimed IPv4 address, in address order
//	state/claims/6/{32 hex digits}   one per claimed IPv6 address
//	state/holds/{tenant}/{allocation}
//	log/audit/{tenant}/{inverted time}{random}   newest first
//	log/requests/{tenant}/{request_id}           expire after a day (lease)
//
// Replicas watch state/ only; the log is read on demand.
package store
