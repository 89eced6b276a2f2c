// Package server is the IPAM's gRPC edge: one file per service. Each handler
// validates its request (every field, before anything is written), converts
// it to the domain's types, calls the allocator or the store, and converts
// the answer back. Errors become gRPC status codes in exactly one function,
// toStatus; internal error text never reaches a client.
package server
