package tenantscope

import (
	"errors"
	"fmt"
)

// ErrUnknownFields refuses a request with fields this build does not
// know: they could hide a resource name, so it cannot be checked.
var ErrUnknownFields = errors.New("the request has fields this server does not know; it cannot check them")

// Refusal is a request that reaches outside its tenant: it names another
// tenant's resource, names none of its own, or asks for a pool the tenant
// may not use. Its text is for the caller.
type Refusal struct{ msg string }

func (r *Refusal) Error() string { return r.msg }

func refusef(format string, args ...any) *Refusal {
	return &Refusal{msg: fmt.Sprintf(format, args...)}
}

// LeakError is a response that names another tenant's resource. The IPAM
// scopes every answer, so it is a bug upstream: the answer is withheld and
// the caller is told nothing of it. Path is the field, for the log.
type LeakError struct{ Path string }

func (e *LeakError) Error() string {
	return fmt.Sprintf("response field %s names another tenant's resource; withheld", e.Path)
}
