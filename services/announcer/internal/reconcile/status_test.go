package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
)

func TestStatusReportsWhatSessionsAreSent(t *testing.T) {
	p4, p6 := netip.MustParsePrefix("203.0.113.1/32"), netip.MustParsePrefix("2001:db8::1/128")
	bgpAddr := func(p string, peers ...string) *ipamv1.AnnouncedAddress {
		return &ipamv1.AnnouncedAddress{Address: p, Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: peers}
	}
	session := func(peer string, state ipamv1.BGPSessionStatus_State, n uint32) *ipamv1.BGPSessionStatus {
		return &ipamv1.BGPSessionStatus{Peer: peer, State: state, AdvertisedPrefixes: n}
	}
	est := ipamv1.BGPSessionStatus_STATE_ESTABLISHED
	tests := []struct {
		name     string
		l2       map[string][]netip.Addr
		sessions []bgp.SessionState
		want     *ipamv1.AnnouncerStatus
	}{
		{"each prefix under the peers that are sent it", nil, []bgp.SessionState{
			{Peer: "r6", State: bgp.StateEstablished, Advertised: 1, Prefixes: []netip.Prefix{p6}},
			{Peer: "r4", State: bgp.StateEstablished, Advertised: 1, Prefixes: []netip.Prefix{p4}},
			{Peer: "s4", State: bgp.StateEstablished, Advertised: 1, Prefixes: []netip.Prefix{p4}},
		}, &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{bgpAddr("2001:db8::1/128", "r6"), bgpAddr("203.0.113.1/32", "r4", "s4")},
			Sessions:  []*ipamv1.BGPSessionStatus{session("r6", est, 1), session("r4", est, 1), session("s4", est, 1)},
		}},
		{"a session that is not established announces nothing", nil, []bgp.SessionState{
			{Peer: "r4", State: bgp.StateActive, Prefixes: []netip.Prefix{p4}},
		}, &ipamv1.AnnouncerStatus{
			Sessions: []*ipamv1.BGPSessionStatus{session("r4", ipamv1.BGPSessionStatus_STATE_ACTIVE, 0)},
		}},
		{"established, sent nothing", nil, []bgp.SessionState{{Peer: "r4", State: bgp.StateEstablished}},
			&ipamv1.AnnouncerStatus{Sessions: []*ipamv1.BGPSessionStatus{session("r4", est, 0)}}},
		{"L2 and BGP", map[string][]netip.Addr{"eth1": {netip.MustParseAddr("192.0.2.9")}, "eth0": {netip.MustParseAddr("192.0.2.9")}},
			[]bgp.SessionState{{Peer: "r4", State: bgp.StateEstablished, Advertised: 1, Prefixes: []netip.Prefix{p4}}},
			&ipamv1.AnnouncerStatus{
				Announced: []*ipamv1.AnnouncedAddress{
					{Address: "192.0.2.9", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0", "eth1"}},
					bgpAddr("203.0.113.1/32", "r4"),
				},
				Sessions: []*ipamv1.BGPSessionStatus{session("r4", est, 1)},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, status(tt.l2, nil, nil, tt.sessions), protocmp.Transform()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// records is a slog handler that keeps the messages and errors it is given.
type records struct {
	mu  sync.Mutex
	got []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, line)
	return nil
}

func (r *records) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func TestRefusalsLoggedOncePerPlan(t *testing.T) {
	mismatch := fmt.Errorf("route 2001:db8::1/128 to %q: %w", "r4", bgp.ErrFamilyMismatch)
	unknown := fmt.Errorf("route 192.0.2.1/32 to %q: %w", "gone", bgp.ErrUnknownPeer)
	gobgp := fmt.Errorf("bgp: apply: %w", errors.Join(errors.New("add path: boom")))
	parse := errors.New(`community "x" is not A:B`)
	const (
		refused  = "the BGP speaker refused part of the plan "
		failed   = "applying the BGP plan failed "
		ignoring = "ignoring part of the BGP plan "
	)
	steps := []struct {
		name    string
		convert []error
		apply   error
		want    []string
	}{
		{"first plan: every refusal", []error{parse}, errors.Join(errors.Join(mismatch, unknown), nil),
			[]string{ignoring + parse.Error(), refused + mismatch.Error(), refused + unknown.Error()}},
		{"next plan, same refusals: nothing", []error{parse}, errors.Join(errors.Join(mismatch, unknown), nil), nil},
		{"one goes away", nil, errors.Join(mismatch), nil},
		{"and comes back", nil, errors.Join(errors.Join(mismatch, unknown), nil), []string{refused + unknown.Error()}},
		{"GoBGP failures every time", nil, errors.Join(errors.Join(mismatch, unknown), gobgp), []string{failed + gobgp.Error()}},
		{"again", nil, errors.Join(errors.Join(mismatch, unknown), gobgp), []string{failed + gobgp.Error()}},
		{"all clear", nil, nil, nil},
		{"refused again after a clear plan", nil, mismatch, []string{refused + mismatch.Error()}},
	}
	h := &records{}
	logger := slog.New(h)
	var l refusalLog
	for _, s := range steps {
		l.log(context.Background(), logger, s.convert, s.apply)
		if diff := cmp.Diff(s.want, h.take()); diff != "" {
			t.Errorf("%s: logged (-want +got):\n%s", s.name, diff)
		}
	}
}

// An L2 address is reported as announced only on the interfaces that
// answer for it: not where it is being probed, nor where another host was
// found using it before the node answered. Conflicts are reported with the
// other host's MAC.
func TestStatusL2Conflicts(t *testing.T) {
	a, b := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")
	other := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	l2addr := func(addr string, itfs ...string) *ipamv1.AnnouncedAddress {
		return &ipamv1.AnnouncedAddress{Address: addr, Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: itfs}
	}
	desired := map[string][]netip.Addr{"eth0": {a, b}, "eth1": {a}}
	tests := []struct {
		name      string
		probing   map[string][]netip.Addr
		conflicts []l2.Conflict
		want      *ipamv1.AnnouncerStatus
	}{
		{"all answered", nil, nil, &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{l2addr(a.String(), "eth0", "eth1"), l2addr(b.String(), "eth0")},
		}},
		{"probing on one interface", map[string][]netip.Addr{"eth0": {a, b}}, nil, &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{l2addr(a.String(), "eth1")},
		}},
		{"found before answering", nil, []l2.Conflict{{Addr: b, Interface: "eth0", MAC: other, Probe: true}}, &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{l2addr(a.String(), "eth0", "eth1")},
			Conflicts: []*ipamv1.AddressConflict{{Address: b.String(), Interface: "eth0", HardwareAddress: other.String(), BeforeAnswering: true}},
		}},
		{"claimed while answered", nil, []l2.Conflict{{Addr: a, Interface: "eth1", MAC: other}}, &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{l2addr(a.String(), "eth0", "eth1"), l2addr(b.String(), "eth0")},
			Conflicts: []*ipamv1.AddressConflict{{Address: a.String(), Interface: "eth1", HardwareAddress: other.String()}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, status(desired, tt.probing, tt.conflicts, nil), protocmp.Transform()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}
