// Package reconcile makes the node announce what its plan says: it turns
// the plan from the IPAM and the node's interfaces into the L2 responder's
// address set and the BGP speaker's peers and routes, re-applies whenever
// either changes, and reports back what the node actually announces.
package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/ipamclient"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
	"github.com/beaconlb/beacon/services/announcer/internal/links"
)

// Responder is the L2 responder.
type Responder interface {
	Set(desired map[string][]netip.Addr) error
}

// Prober is a responder that probes new L2 addresses for other hosts
// using them, except those Beacon was already answering for.
type Prober interface {
	SetKnown(known []netip.Addr)
}

// Conflicts reports other hosts using the node's L2 addresses, and the
// addresses being probed for them (not answered yet).
type Conflicts interface {
	Conflicts() []l2.Conflict
	Probing() map[string][]netip.Addr
	ConflictsChanged() <-chan struct{}
}

// Speaker is the BGP speaker.
type Speaker interface {
	Apply(ctx context.Context, peers []bgp.PeerConfig, routes []bgp.Route) error
	Sessions() []bgp.SessionState
	Events() <-chan struct{}
}

// Installer learns which plan the responder answers from, so that the
// node's right to answer, granted per plan, takes effect (package tenure).
type Installer interface {
	Installed(gen uint64)
}

// Session is the node's session with the IPAM.
type Session interface {
	Updates() <-chan ipamclient.Update
	SetInterfaces([]*ipamv1.NetworkInterface)
	SetStatus(*ipamv1.AnnouncerStatus)
}

// Reconciler drives the responder and the speaker.
type Reconciler struct {
	l2        Responder
	conflicts Conflicts
	rights    Installer
	speaker   Speaker
	session   Session
	logger    *slog.Logger
	readFile  func(string) ([]byte, error)
}

// New returns a Reconciler. rights learns each plan generation once the
// responder answers from it. conflicts, if not nil, are reported in the
// node's status; a responder that is a Prober learns the plan's known
// addresses before each Set.
func New(responder Responder, conflicts Conflicts, rights Installer, speaker Speaker, session Session, logger *slog.Logger) *Reconciler {
	return &Reconciler{l2: responder, conflicts: conflicts, rights: rights, speaker: speaker, session: session, logger: logger, readFile: os.ReadFile}
}

// Run reconciles until ctx is done. interfaces delivers the node's
// interfaces whenever they change.
func (r *Reconciler) Run(ctx context.Context, interfaces <-chan []links.Interface) error {
	var plan *ipamclient.Plan
	var itfs []links.Interface
	lost := false
	var answered map[string][]netip.Addr // the set the responder has
	var reported *ipamv1.AnnouncerStatus
	var gen uint64 // of the plan the responder answers from
	var refusals refusalLog
	var conflictsChanged <-chan struct{}
	if r.conflicts != nil {
		conflictsChanged = r.conflicts.ConflictsChanged()
	}
	for {
		bgpChanged := false
		next := gen
		select {
		case <-ctx.Done():
			return nil
		case u := <-r.session.Updates():
			bgpChanged = plan == nil || u.Plan == nil || !sameBGP(plan, u.Plan)
			plan, lost, next = u.Plan, u.Lost, u.Gen
		case itfs = <-interfaces:
			r.session.SetInterfaces(interfacesToProto(itfs))
		case <-r.speaker.Events():
		case <-conflictsChanged:
		}
		installed := true
		if want := L2Desired(plan, itfs, lost); !sameL2(want, answered) {
			if p, ok := r.l2.(Prober); ok && plan != nil {
				p.SetKnown(slices.Collect(maps.Keys(plan.Known)))
			}
			if err := r.l2.Set(want); err != nil {
				// The responder still answers from the previous set: the
				// new plan's right must not count for it.
				r.logger.ErrorContext(ctx, "setting L2 addresses failed", "error", err)
				installed = false
			} else {
				answered = want
			}
		}
		if installed && next > gen {
			gen = next
			r.rights.Installed(gen)
		}
		if bgpChanged {
			peers, rs, errs := BGPDesired(plan, r.readFile)
			err := r.speaker.Apply(ctx, peers, rs)
			if errors.Is(err, context.Canceled) {
				err = nil
			}
			refusals.log(ctx, r.logger, errs, err)
		}
		var conflicts []l2.Conflict
		var probing map[string][]netip.Addr
		if r.conflicts != nil {
			conflicts, probing = r.conflicts.Conflicts(), r.conflicts.Probing()
		}
		if st := status(answered, probing, conflicts, r.speaker.Sessions()); !proto.Equal(st, reported) {
			r.session.SetStatus(st)
			reported = st
		}
	}
}

func sameBGP(a, b *ipamclient.Plan) bool {
	if len(a.Peers) != len(b.Peers) || len(a.Routes) != len(b.Routes) {
		return false
	}
	for k, v := range a.Peers {
		if w, ok := b.Peers[k]; !ok || v != w {
			return false
		}
	}
	for k, v := range a.Routes {
		if w, ok := b.Routes[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func sameL2(a, b map[string][]netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func interfacesToProto(itfs []links.Interface) []*ipamv1.NetworkInterface {
	out := make([]*ipamv1.NetworkInterface, 0, len(itfs))
	for _, i := range itfs {
		ni := &ipamv1.NetworkInterface{Name: i.Name, HardwareAddress: i.MAC, Up: i.Up}
		for _, a := range i.Addrs {
			ni.Addresses = append(ni.Addresses, a.String())
		}
		out = append(out, ni)
	}
	return out
}

// status describes what the node announces: the L2 addresses it answers
// for (not those it is still probing, or another host was found using
// before the node answered, on an interface), the conflicts, and each prefix under the peers whose established sessions the
// speaker reports sending it (GoBGP's adj-RIB-out), not the plan's routes: a
// route the speaker refused, or one to a peer that is down, is not
// announced.
func status(desired, probing map[string][]netip.Addr, conflicts []l2.Conflict, sessions []bgp.SessionState) *ipamv1.AnnouncerStatus {
	st := &ipamv1.AnnouncerStatus{}
	blocked := map[string]map[netip.Addr]bool{}
	for itf, addrs := range probing {
		for _, a := range addrs {
			if blocked[itf] == nil {
				blocked[itf] = map[netip.Addr]bool{}
			}
			blocked[itf][a] = true
		}
	}
	for _, c := range conflicts {
		if c.Probe {
			if blocked[c.Interface] == nil {
				blocked[c.Interface] = map[netip.Addr]bool{}
			}
			blocked[c.Interface][c.Addr] = true
		}
		ac := &ipamv1.AddressConflict{Address: c.Addr.String(), Interface: c.Interface, HardwareAddress: c.MAC.String(), BeforeAnswering: c.Probe}
		if !c.First.IsZero() {
			ac.FirstSeenTime = timestamppb.New(c.First)
		}
		st.Conflicts = append(st.Conflicts, ac)
	}
	byAddr := map[netip.Addr][]string{}
	for itf, addrs := range desired {
		for _, a := range addrs {
			if !blocked[itf][a] {
				byAddr[a] = append(byAddr[a], itf)
			}
		}
	}
	for a, itfs := range byAddr {
		slices.Sort(itfs)
		st.Announced = append(st.Announced, &ipamv1.AnnouncedAddress{Address: a.String(), Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: itfs})
	}
	byPrefix := map[netip.Prefix][]string{}
	for _, s := range sessions {
		if s.State != bgp.StateEstablished {
			continue
		}
		for _, p := range s.Prefixes {
			byPrefix[p] = append(byPrefix[p], s.Peer)
		}
	}
	for p, peers := range byPrefix {
		slices.Sort(peers)
		st.Announced = append(st.Announced, &ipamv1.AnnouncedAddress{Address: p.String(), Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: peers})
	}
	slices.SortFunc(st.Announced, func(a, b *ipamv1.AnnouncedAddress) int { return strings.Compare(a.GetAddress(), b.GetAddress()) })
	for _, s := range sessions {
		bs := &ipamv1.BGPSessionStatus{
			Peer: s.Peer, BfdUp: s.BFDUp, AdvertisedPrefixes: uint32(s.Advertised),
			State: ipamv1.BGPSessionStatus_State(ipamv1.BGPSessionStatus_State_value["STATE_"+stateName(s.State)]),
		}
		if !s.Since.IsZero() {
			bs.Since = timestamppb.New(s.Since)
		}
		st.Sessions = append(st.Sessions, bs)
	}
	return st
}

func stateName(s string) string {
	switch s {
	case bgp.StateOpenSent:
		return "OPEN_SENT"
	case bgp.StateOpenConfirm:
		return "OPEN_CONFIRM"
	}
	return strings.ToUpper(s)
}
