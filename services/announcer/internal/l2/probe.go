package l2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// ProbeOptions configure conflict detection. The zero value probes nothing.
type ProbeOptions struct {
	// Count is the number of probes sent before an address is first
	// answered; 0 disables probing (claims on answered addresses are still
	// recorded as conflicts).
	Count int
	// Interval is the time between probes.
	Interval time.Duration
	// Wait is the time after the last probe before the address is free.
	Wait time.Duration
	// Retry is the time between probe rounds of a conflicting address.
	Retry time.Duration
	// Hold is how long a conflict is kept after the last claim seen.
	Hold time.Duration
}

// DefaultProbe is what announcerd uses: three probes 100 ms apart and a
// 200 ms wait (the address is answered ~400 ms after it is first planned),
// a new round every 10 s while another host has it, and conflicts kept for
// a minute after the last claim.
func DefaultProbe() ProbeOptions {
	return ProbeOptions{Count: 3, Interval: 100 * time.Millisecond, Wait: 200 * time.Millisecond, Retry: 10 * time.Second, Hold: time.Minute}
}

func (o ProbeOptions) withDefaults() ProbeOptions {
	d := DefaultProbe()
	if o.Interval <= 0 {
		o.Interval = d.Interval
	}
	if o.Wait <= 0 {
		o.Wait = d.Wait
	}
	if o.Retry <= 0 {
		o.Retry = d.Retry
	}
	if o.Hold <= 0 {
		o.Hold = d.Hold
	}
	return o
}

// A Conflict is another host using an address this node was told to answer
// for, on one interface.
type Conflict struct {
	Addr      netip.Addr
	Interface string
	// MAC is the other host's hardware address.
	MAC net.HardwareAddr
	// Probe is true when the conflict was found before the node answered
	// (the node does not answer for the address on Interface), false when
	// another host claimed an address the node answers for.
	Probe bool
	// First and Last are when the conflict was first and last seen.
	First, Last time.Time
}

type conflictKey struct {
	ifname string
	addr   netip.Addr
}

// SetKnown names the addresses Beacon was already answering for (on this
// or another node): when they are added to the desired set they are
// answered at once, without probing. Call it before the Set that adds them.
func (r *Responder) SetKnown(known []netip.Addr) {
	m := make(map[netip.Addr]bool, len(known))
	for _, a := range known {
		m[a.Unmap()] = true
	}
	r.known.Store(&m)
}

// Conflicts returns the conflicts now known, sorted by interface and
// address.
func (r *Responder) Conflicts() []Conflict {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	out := slices.Collect(maps.Values(r.conflicts))
	slices.SortFunc(out, func(a, b Conflict) int {
		if a.Interface != b.Interface {
			return compareStrings(a.Interface, b.Interface)
		}
		return a.Addr.Compare(b.Addr)
	})
	for i := range out {
		out[i].MAC = slices.Clone(out[i].MAC)
	}
	return out
}

// Probing returns the addresses being probed, and so not answered yet,
// per interface.
func (r *Responder) Probing() map[string][]netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]netip.Addr{}
	for name, lk := range r.links {
		lk.mu.Lock()
		for a := range lk.probes {
			out[name] = append(out[name], a)
		}
		lk.mu.Unlock()
	}
	return out
}

// ConflictsChanged is signalled when the set of conflicts changes (not when
// one is only seen again), and when an address starts or stops being
// probed.
func (r *Responder) ConflictsChanged() <-chan struct{} { return r.conflictsChanged }

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recordConflict notes a claim by mac on addr seen on ifname.
func (r *Responder) recordConflict(ifname string, addr netip.Addr, mac net.HardwareAddr, probe bool) {
	now := time.Now()
	k := conflictKey{ifname, addr}
	r.cmu.Lock()
	c, ok := r.conflicts[k]
	changed := !ok || !bytes.Equal(c.MAC, mac) || c.Probe != probe
	if !ok {
		c = Conflict{Addr: addr, Interface: ifname, First: now}
	}
	c.MAC, c.Probe, c.Last = slices.Clone(mac), probe, now
	r.conflicts[k] = c
	r.cmu.Unlock()
	if !ok {
		r.counters(familyOf(addr)).conflicts.Add(1)
		r.log.Warn("address conflict: another host uses an address this node was told to answer for",
			"interface", ifname, "addr", addr, "other_mac", mac.String(), "before_answering", probe)
	}
	if changed {
		r.signalConflicts()
	}
}

// clearConflict forgets the conflict on addr on ifname, if any.
func (r *Responder) clearConflict(ifname string, addr netip.Addr) {
	r.cmu.Lock()
	_, ok := r.conflicts[conflictKey{ifname, addr}]
	delete(r.conflicts, conflictKey{ifname, addr})
	r.cmu.Unlock()
	if ok {
		r.signalConflicts()
	}
}

// expireConflicts forgets the conflicts of addresses no longer desired on
// their interface, and claims on answered addresses not seen for Hold.
func (r *Responder) expireConflicts(now time.Time) {
	p := *r.plan.Load()
	r.cmu.Lock()
	n := len(r.conflicts)
	for k, c := range r.conflicts {
		if !p.has(k.ifname, k.addr) || (!c.Probe && now.Sub(c.Last) > r.opts.Probe.Hold) {
			delete(r.conflicts, k)
		}
	}
	changed := len(r.conflicts) != n
	r.cmu.Unlock()
	if changed {
		r.signalConflicts()
	}
}

func (r *Responder) signalConflicts() {
	select {
	case r.conflictsChanged <- struct{}{}:
	default:
	}
}

// needsProbe reports whether addr, newly answered on a link, must be
// probed first. The caller holds r.mu.
func (r *Responder) needsProbe(addr netip.Addr) bool {
	if r.opts.Probe.Count <= 0 || r.cleared[addr] {
		return false
	}
	return !(*r.known.Load())[addr]
}

// start begins serving addr on the link: probing first when it needs it,
// else announcing at once. The caller holds r.mu.
func (l *link) start(addr netip.Addr, now time.Time) {
	if l.r.needsProbe(addr) {
		l.probe(addr)
		return
	}
	l.schedule(addr, now)
}

// probing reports whether addr is being probed on the link (not answered).
func (l *link) probing(addr netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.probes[addr]
	return ok
}

// probeRun is one address's probing on one link.
type probeRun struct {
	conflict chan net.HardwareAddr // capacity 1: a claim seen
}

// probe starts probing addr on the link unless it already is. The caller
// holds r.mu.
func (l *link) probe(addr netip.Addr) {
	l.mu.Lock()
	if _, ok := l.probes[addr]; ok {
		l.mu.Unlock()
		return
	}
	if l.probes == nil {
		l.probes = make(map[netip.Addr]*probeRun)
	}
	pr := &probeRun{conflict: make(chan net.HardwareAddr, 1)}
	l.probes[addr] = pr
	l.mu.Unlock()
	l.r.signalConflicts()
	l.wg.Go(func() { l.probeLoop(addr, pr) })
}

// claimedWhileProbing passes a claim on addr to its probe, if it is being
// probed, and reports whether it was.
func (l *link) claimedWhileProbing(addr netip.Addr, mac net.HardwareAddr) bool {
	l.mu.Lock()
	pr, ok := l.probes[addr]
	l.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case pr.conflict <- slices.Clone(mac):
	default:
	}
	return true
}

// probeLoop probes addr until no other host claims it, then answers for it
// (announcing it), or until it is no longer desired or the link closes.
func (l *link) probeLoop(addr netip.Addr, pr *probeRun) {
	o := l.r.opts.Probe
	done := func() {
		l.mu.Lock()
		delete(l.probes, addr)
		l.mu.Unlock()
	}
	wait := func(d time.Duration) (net.HardwareAddr, bool) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-l.stop:
			return nil, false
		case mac := <-pr.conflict:
			return mac, true
		case <-t.C:
			return nil, true
		}
	}
	for {
		var other net.HardwareAddr
		for i := 0; i < o.Count && other == nil; i++ {
			if !l.r.answers(l.name, addr) {
				done()
				return
			}
			l.sendProbe(addr)
			d := o.Interval
			if i == o.Count-1 {
				d = o.Wait
			}
			mac, ok := wait(d)
			if !ok {
				return
			}
			other = mac
		}
		if other == nil {
			break
		}
		l.r.recordConflict(l.name, addr, other, true)
		for other != nil { // claims go on: wait for quiet before probing again
			mac, ok := wait(o.Retry)
			if !ok {
				return
			}
			other = mac
		}
	}
	now := time.Now()
	l.r.mu.Lock()
	done()
	if l.r.answers(l.name, addr) {
		l.r.cleared[addr] = true
		l.schedule(addr, now)
	}
	l.r.mu.Unlock()
	l.r.clearConflict(l.name, addr)
	l.r.signalConflicts()
	l.r.log.Info("no other host answered the probes; answering", "interface", l.name, "addr", addr)
}

// isProbe reports whether a frame that answerARP or answerNS accepted as a
// request is a probe: an ARP request from 0.0.0.0 or a DAD solicitation
// (from ::).
func isProbe(frame []byte) bool {
	const arpSenderIP = ethHeaderLen + 14 // after hardware/protocol types, lengths, operation, sender MAC
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case uint16(ethernet.EtherTypeARP):
		return len(frame) >= arpSenderIP+4 && netip.AddrFrom4([4]byte(frame[arpSenderIP:arpSenderIP+4])).IsUnspecified()
	case uint16(ethernet.EtherTypeIPv6):
		return len(frame) >= ethHeaderLen+24 && netip.AddrFrom16([16]byte(frame[ethHeaderLen+8:ethHeaderLen+24])).IsUnspecified()
	}
	return false
}

// sendProbe sends one ARP probe or DAD solicitation for addr.
func (l *link) sendProbe(addr netip.Addr) {
	var (
		frame []byte
		conn  = l.arp
		err   error
	)
	if addr.Is4() {
		frame, err = arpProbe(l.mac, addr)
	} else {
		conn = l.nd
		frame, err = dadNS(l.mac, addr)
	}
	if err == nil {
		err = l.send(conn, frame)
	}
	if err != nil {
		l.r.event(EventError, l.name, addr)
		l.r.log.Warn("cannot send probe", "interface", l.name, "addr", addr, "err", err)
		return
	}
	l.r.event(EventProbe, l.name, addr)
}

// arpProbe builds an RFC 5227 ARP probe for addr: a broadcast request with
// sender address 0.0.0.0 and target hardware address zero.
func arpProbe(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	p := arp.Packet{
		HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4), HardwareAddrLength: 6, IPLength: 4,
		Operation: arp.OperationRequest, SenderHardwareAddr: mac, SenderIP: netip.IPv4Unspecified(),
		TargetHardwareAddr: make(net.HardwareAddr, 6), TargetIP: addr,
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal ARP probe for %s: %w", addr, err)
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, err := f.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal Ethernet frame for %s: %w", addr, err)
	}
	return b, nil
}

// dadNS builds a duplicate address detection solicitation for addr (RFC
// 4862 section 5.4.2): from ::, to addr's solicited-node group, with no
// source link-layer option.
func dadNS(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	snm, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return nil, fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	ethDst, err := solicitedNodeMAC(addr)
	if err != nil {
		return nil, err
	}
	icmp, err := ndp.MarshalMessageChecksum(&ndp.NeighborSolicitation{TargetAddress: addr}, netip.IPv6Unspecified(), snm)
	if err != nil {
		return nil, fmt.Errorf("marshal DAD solicitation for %s: %w", addr, err)
	}
	b := make([]byte, ethHeaderLen+ipv6HeaderLen+len(icmp))
	copy(b[0:6], ethDst)
	copy(b[6:12], mac)
	binary.BigEndian.PutUint16(b[12:14], uint16(ethernet.EtherTypeIPv6))
	ip := b[ethHeaderLen:]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	ip[6] = protoICMPv6
	ip[7] = ndpHopLimit
	dst16 := snm.As16()
	copy(ip[24:40], dst16[:]) // source stays ::
	copy(ip[ipv6HeaderLen:], icmp)
	return b, nil
}
