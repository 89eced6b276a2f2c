package reconcile

import (
	"errors"
	"net/netip"
)

// Responders hands the same desired L2 set to several consumers in order:
// the L2 responder and, on bare metal, the device that makes the addresses
// local (package localaddr), which comes first so that an address is local
// before the responder draws traffic to it.
type Responders []Responder

// Set calls Set on each, and returns their errors joined.
func (rs Responders) Set(desired map[string][]netip.Addr) error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Set(desired))
	}
	return errors.Join(errs...)
}

// SetKnown passes the known addresses to each consumer that probes.
func (rs Responders) SetKnown(known []netip.Addr) {
	for _, r := range rs {
		if p, ok := r.(Prober); ok {
			p.SetKnown(known)
		}
	}
}
