package l2

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/ipv6"
)

// link serves one interface: an ARP socket, a neighbor-solicitation socket,
// a reader goroutine on each and an announcer goroutine. It lives from
// openLink to close; when a socket fails it reports failed and pokes the
// responder, whose Run closes it and opens a new one when it can.
type link struct {
	r     *Responder
	name  string
	index int
	mac   net.HardwareAddr
	arp   *packet.Conn
	nd    *packet.Conn
	// mld holds IPv6 multicast memberships so that the kernel sends MLD
	// reports for the solicited-node groups: switches (and Linux bridges)
	// that snoop MLD forward a group's solicitations only to ports that
	// reported it. It never carries traffic. Nil when the node has no IPv6.
	mld *ipv6.PacketConn
	ifi net.Interface

	groups map[string]netip.Addr // joined groups by multicast MAC; Run's goroutine only

	closing  atomic.Bool
	broken   atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup
	announce chan struct{} // capacity 1: "pending changed"

	mu       sync.Mutex
	pending  []announcement
	defended map[netip.Addr]time.Time // last defence per address
	probes   map[netip.Addr]*probeRun // addresses being probed: not answered yet
}

// defendInterval is the least time between two defences of one address on
// one link. RFC 5227 asks hosts for ten seconds; a node whose address is
// claimed by a stale owner must win the client back at once, yet two nodes
// that both believe they own an address (for the instant of a planned move)
// must not trade announcements in a storm.
const defendInterval = 250 * time.Millisecond

// announcement is one scheduled announcement of addr.
type announcement struct {
	addr netip.Addr
	at   time.Time
}

func openLink(r *Responder, ifi net.Interface) (*link, error) {
	arpBPF, err := arpFilter()
	if err != nil {
		return nil, fmt.Errorf("assemble ARP filter: %w", err)
	}
	nsBPF, err := nsFilter()
	if err != nil {
		return nil, fmt.Errorf("assemble NS filter: %w", err)
	}
	arpConn, err := packet.Listen(&ifi, packet.Raw, int(ethernet.EtherTypeARP), &packet.Config{Filter: arpBPF})
	if err != nil {
		return nil, fmt.Errorf("open ARP socket on %s: %w", ifi.Name, err)
	}
	ndConn, err := packet.Listen(&ifi, packet.Raw, int(ethernet.EtherTypeIPv6), &packet.Config{Filter: nsBPF})
	if err != nil {
		_ = arpConn.Close()
		return nil, fmt.Errorf("open NDP socket on %s: %w", ifi.Name, err)
	}
	l := &link{
		r:        r,
		ifi:      ifi,
		name:     ifi.Name,
		index:    ifi.Index,
		mac:      ifi.HardwareAddr,
		arp:      arpConn,
		nd:       ndConn,
		groups:   make(map[string]netip.Addr),
		stop:     make(chan struct{}),
		announce: make(chan struct{}, 1),
	}
	if c, err := net.ListenPacket("udp6", "[::]:0"); err != nil {
		r.log.Warn("no IPv6 socket for MLD reports; solicitations may not reach this node through MLD-snooping switches",
			"interface", ifi.Name, "err", err)
	} else {
		l.mld = ipv6.NewPacketConn(c)
	}
	l.wg.Go(func() { l.read(l.arp, answerARP) })
	l.wg.Go(func() { l.read(l.nd, answerNS) })
	l.wg.Go(l.announceLoop)
	return l, nil
}

// failed reports whether a socket failed (the interface went down or away).
func (l *link) failed() bool { return l.broken.Load() }

// close stops answering on the interface and waits for the goroutines.
func (l *link) close() {
	if l.closing.Swap(true) {
		return
	}
	close(l.stop)
	_ = l.arp.Close()
	_ = l.nd.Close()
	if l.mld != nil {
		_ = l.mld.Close()
	}
	l.wg.Wait()
}

type decider func(frame []byte, mac net.HardwareAddr, answers func(netip.Addr) bool) ([]byte, netip.Addr, verdict)

func (l *link) read(conn *packet.Conn, decide decider) {
	buf := make([]byte, maxFrame)
	// Frames are judged against every desired address, probed ones too:
	// a claim on one being probed is a conflict, a request for one is
	// not answered.
	answers := func(a netip.Addr) bool { return l.r.answers(l.name, a) }
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if l.closing.Load() {
				return
			}
			l.r.log.Warn("l2 socket failed; will reopen", "interface", l.name, "err", err)
			l.broken.Store(true)
			l.r.poke()
			return
		}
		reply, target, v := decide(buf[:n], l.mac, answers)
		if v.isRequest() {
			l.r.event(EventRequest, l.name, target)
		}
		if v == claimed {
			other := net.HardwareAddr(buf[6:12]) // the claimer's Ethernet source
			if l.claimedWhileProbing(target, other) {
				continue
			}
			l.r.recordConflict(l.name, target, other, false)
			l.defend(target)
			continue
		}
		if v == answered && l.probing(target) {
			// Another host probing the address we probe wants it too
			// (RFC 5227 section 2.1.1): it is in use; its request is not
			// answered.
			if isProbe(buf[:n]) {
				l.claimedWhileProbing(target, net.HardwareAddr(buf[6:12]))
			}
			continue
		}
		if v != answered {
			continue
		}
		// The right is asked for here, after the frame was read: a node
		// that wakes from a freeze with requests queued in its socket
		// answers none of them unless the IPAM has confirmed its plan since.
		if !l.r.opts.Rights.Valid() {
			l.r.event(EventWithheld, l.name, target)
			continue
		}
		if err := l.send(conn, reply); err != nil {
			l.r.event(EventError, l.name, target)
			l.r.log.Warn("cannot send reply", "interface", l.name, "addr", target, "err", err)
			continue
		}
		l.r.event(EventReply, l.name, target)
	}
}

func (l *link) send(conn *packet.Conn, frame []byte) error {
	if len(frame) < ethHeaderLen {
		return errors.New("frame too short")
	}
	_, err := conn.WriteTo(frame, &packet.Addr{HardwareAddr: net.HardwareAddr(frame[0:6])})
	if err != nil {
		return fmt.Errorf("send on %s: %w", l.name, err)
	}
	return nil
}

// schedule (re)starts addr's announcements from now. The caller holds the
// responder's lock, which orders it against Set.
func (l *link) schedule(addr netip.Addr, now time.Time) {
	l.mu.Lock()
	kept := l.pending[:0]
	for _, a := range l.pending {
		if a.addr != addr {
			kept = append(kept, a)
		}
	}
	l.pending = kept
	for _, d := range l.r.opts.Announcements {
		l.pending = append(l.pending, announcement{addr: addr, at: now.Add(d)})
	}
	l.mu.Unlock()
	select {
	case l.announce <- struct{}{}:
	default:
	}
}

// due removes and returns the announcements due at now, and the time the
// next one is due (zero if none).
func (l *link) due(now time.Time) ([]netip.Addr, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []netip.Addr
	var next time.Time
	kept := l.pending[:0]
	for _, a := range l.pending {
		if !a.at.After(now) {
			out = append(out, a.addr)
			continue
		}
		kept = append(kept, a)
		if next.IsZero() || a.at.Before(next) {
			next = a.at
		}
	}
	l.pending = kept
	return out, next
}

func (l *link) announceLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		addrs, next := l.due(time.Now())
		for _, a := range addrs {
			l.announceOne(a)
		}
		if next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-l.stop:
			return
		case <-l.announce:
		case <-timer.C:
		}
	}
}

// defend answers another host's claim on addr (its ARP reply, gratuitous
// ARP or neighbor advertisement) by announcing addr at once, if the node
// still answers for it, has the right to, and has not defended it within
// defendInterval.
func (l *link) defend(addr netip.Addr) {
	now := time.Now()
	l.mu.Lock()
	if last, ok := l.defended[addr]; ok && now.Sub(last) < defendInterval {
		l.mu.Unlock()
		return
	}
	if l.defended == nil {
		l.defended = make(map[netip.Addr]time.Time)
	}
	l.defended[addr] = now
	for a, t := range l.defended { // forget old defences
		if now.Sub(t) > time.Minute {
			delete(l.defended, a)
		}
	}
	l.mu.Unlock()
	if !l.r.answers(l.name, addr) || !l.r.opts.Rights.Valid() {
		return
	}
	l.r.log.Warn("another host claims an address this node answers for; announcing it again", "interface", l.name, "addr", addr)
	l.r.event(EventDefence, l.name, addr)
	l.announceOne(addr)
}

func (l *link) announceOne(addr netip.Addr) {
	if !l.r.answers(l.name, addr) || l.probing(addr) {
		return // removed since it was scheduled, or not answered yet
	}
	var (
		frames [][]byte
		conn   *packet.Conn
		err    error
	)
	if addr.Is4() {
		conn = l.arp
		frames, err = gratuitousARP(l.mac, addr)
	} else {
		conn = l.nd
		var f []byte
		f, err = unsolicitedNA(l.mac, addr)
		frames = [][]byte{f}
	}
	if err != nil {
		l.r.event(EventError, l.name, addr)
		l.r.log.Error("cannot build announcement", "interface", l.name, "addr", addr, "err", err)
		return
	}
	for _, f := range frames {
		if !l.r.opts.Rights.Valid() {
			l.r.event(EventWithheld, l.name, addr)
			return
		}
		if err := l.send(conn, f); err != nil {
			l.r.event(EventError, l.name, addr)
			l.r.log.Warn("cannot send announcement", "interface", l.name, "addr", addr, "err", err)
			continue
		}
		l.r.event(EventAnnouncement, l.name, addr)
	}
	l.r.log.Debug("announced", "interface", l.name, "addr", addr)
}

// syncGroups joins the solicited-node multicast groups of the IPv6
// addresses in addrs and leaves the others: on the packet socket (the
// interface's multicast filter) and, when it can, on the MLD socket (reports
// to snooping switches). Only the packet socket's membership is required;
// an MLD failure is logged once per group.
func (l *link) syncGroups(addrs map[netip.Addr]struct{}) error {
	type group struct {
		mac net.HardwareAddr
		ip  netip.Addr
	}
	want := make(map[string]group)
	for a := range addrs {
		if !a.Is6() {
			continue
		}
		mac, err := solicitedNodeMAC(a)
		if err != nil {
			return err
		}
		snm, err := ndp.SolicitedNodeMulticast(a)
		if err != nil {
			return fmt.Errorf("solicited-node group of %s: %w", a, err)
		}
		want[string(mac)] = group{mac, snm}
	}
	var errs []error
	for k, g := range want {
		if _, ok := l.groups[k]; ok {
			continue
		}
		if err := l.nd.JoinGroup(g.mac); err != nil {
			errs = append(errs, fmt.Errorf("join %s on %s: %w", g.mac, l.name, err))
			continue
		}
		l.groups[k] = g.ip
		if l.mld != nil {
			if err := l.mld.JoinGroup(&l.ifi, &net.UDPAddr{IP: g.ip.AsSlice()}); err != nil {
				l.r.log.Warn("cannot join solicited-node group for MLD reports",
					"interface", l.name, "group", g.ip, "err", err)
			}
		}
	}
	for k, ip := range l.groups {
		if _, ok := want[k]; ok {
			continue
		}
		mac := net.HardwareAddr(k)
		if err := l.nd.LeaveGroup(mac); err != nil {
			errs = append(errs, fmt.Errorf("leave %s on %s: %w", mac, l.name, err))
		}
		if l.mld != nil {
			_ = l.mld.LeaveGroup(&l.ifi, &net.UDPAddr{IP: ip.AsSlice()}) // not joined if the join failed
		}
		delete(l.groups, k)
	}
	return errors.Join(errs...)
}
