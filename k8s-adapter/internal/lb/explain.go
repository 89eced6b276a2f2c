package lb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
)

// Explain turns an error of an IPAM call into a reason from the reason
// table and a sentence a Service's or pool's owner can act on. It is the
// one place where IPAM errors become user-facing text: no gRPC codes, no
// "rpc error: ..." transport text. tenant is the adapter's, for the
// beaconctl command that ends a hold.
func Explain(err error, tenant string) (string, string) {
	if err == nil {
		return "", ""
	}
	var e *Error
	if !errors.As(err, &e) {
		if _, ok := status.FromError(err); !ok || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return reason.IPAMUnavailable, "the IPAM did not answer; retrying"
		}
		e = asError(err)
	}
	msg := sentence(e.Message)
	switch e.Reason {
	case "ADDRESS_IN_USE":
		if owner := e.Metadata["held_for"]; owner != "" {
			// The end as a time, not "in 9m": the same message on every
			// retry, so that the Events aggregate.
			end := e.Metadata["hold_expire_time"]
			addr := addressIn(e.Message)
			return reason.AddressHeld, fmt.Sprintf("%s is kept for %s, deleted, until %s: a release hold, so that %s gets it back if it returns; "+
				"it is free when the hold ends, or now with `beaconctl alloc release %s --tenant %s`", addr, owner, end, owner, owner, tenant)
		}
		return reason.AddressInUse, msg + "; another Service holds it (share it with the allow-shared-ip annotation on both, or ask for another address)"
	case "ADDRESS_NOT_IN_POOL":
		return reason.AddressNotInPool, msg + "; ask for an address of a pool"
	case "POOL_EXHAUSTED":
		return reason.PoolExhausted, msg + "; no free address in the pools that serve this Service"
	case "QUOTA_EXCEEDED":
		return reason.QuotaExceeded, msg
	case "NOT_ALLOWED":
		return reason.NotAllowed, msg
	case "POOL_OVERLAP":
		return reason.PoolOverlap, msg
	case "POOL_IN_USE":
		return reason.PoolInUse, msg
	case "IN_USE":
		return reason.InUse, msg
	case "NOT_FOUND":
		if strings.HasPrefix(e.Message, "global group ") {
			return reason.GlobalGroupNotFound, msg + "; an administrator creates it with `beaconctl group create POOL/GROUP --tenant " + tenant + "`"
		}
		if strings.Contains(e.Message, "pool") {
			return reason.PoolNotFound, msg
		}
	}
	switch {
	case e.Retryable():
		return reason.IPAMUnavailable, "the IPAM is unavailable or busy; retrying"
	case e.Code == codes.InvalidArgument:
		return reason.InvalidSpec, msg
	case e.Code == codes.PermissionDenied || e.Code == codes.Unauthenticated:
		return reason.IPAMRefused, "the IPAM refused the adapter's credentials: " + msg
	}
	return reason.IPAMRefused, msg
}

// sentence returns an IPAM message as the start of a sentence: trimmed, no
// trailing period.
func sentence(m string) string {
	m = strings.TrimRight(strings.TrimSpace(m), ".")
	if m == "" {
		return "the IPAM refused"
	}
	return m
}

// addressIn returns "address X" from an IPAM message that starts with it,
// else "the address".
func addressIn(m string) string {
	f := strings.Fields(m)
	if len(f) >= 2 && f[0] == "address" {
		return "address " + f[1]
	}
	return "the address"
}
