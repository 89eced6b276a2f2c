package l2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
)

// ErrInvalid is wrapped by Set's errors for a desired set it refuses.
var ErrInvalid = errors.New("l2: invalid desired addresses")

// Family is an address family.
type Family int

// The two families, numbered as IP versions.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return fmt.Sprintf("family(%d)", int(f))
}

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// EventKind says what an Event records.
type EventKind int

// The events a Responder reports to Options.OnEvent.
const (
	EventRequest      EventKind = iota + 1 // a valid ARP request / neighbor solicitation from another host
	EventReply                             // an answer sent
	EventAnnouncement                      // a gratuitous ARP / unsolicited advertisement frame sent
	EventError                             // a frame could not be sent
	EventWithheld                          // a reply or announcement not sent: the node had no right to answer
	EventDefence                           // another host claimed an address answered here, which was announced again
	EventProbe                             // an ARP probe / DAD solicitation sent before answering for an address
)

func (k EventKind) String() string {
	switch k {
	case EventRequest:
		return "request"
	case EventReply:
		return "reply"
	case EventAnnouncement:
		return "announcement"
	case EventError:
		return "error"
	case EventWithheld:
		return "withheld"
	case EventDefence:
		return "defence"
	case EventProbe:
		return "probe"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// An Event is one thing the responder saw or did, for metrics.
type Event struct {
	Kind      EventKind
	Family    Family
	Interface string
	// Addr is the address asked for or announced.
	Addr netip.Addr
}

// DefaultAnnouncements is used when Options.Announcements is empty: at once,
// then twice more, each past Linux's one-second neighbour locktime, so that
// a client whose entry changed less than a second earlier still takes it.
func DefaultAnnouncements() []time.Duration {
	return []time.Duration{0, 1100 * time.Millisecond, 2200 * time.Millisecond}
}

// DefaultCheckInterval is used when Options.CheckInterval is zero.
const DefaultCheckInterval = time.Second

// Options configure a Responder. The zero value is usable.
type Options struct {
	// Announcements are the delays, from the moment an address starts being
	// answered on an interface, at which it is announced. Empty means
	// DefaultAnnouncements.
	Announcements []time.Duration
	// CheckInterval is how often interfaces are re-checked (present, up,
	// same index and MAC) besides when the kernel reports a link change.
	// Zero means DefaultCheckInterval.
	CheckInterval time.Duration
	// OnEvent, when set, is called for every Event, synchronously from the
	// responder's goroutines: it must be quick and safe for concurrent use.
	OnEvent func(Event)
	// Rights, when set, is the node's right to answer (package tenure):
	// no reply or announcement is sent while it is not valid, whatever the
	// desired set says, and every address is announced anew when it
	// resumes. Nil: always answer (tests of the wire work alone).
	Rights Rights
	// Probe configures conflict detection (see ProbeOptions); the zero
	// value answers new addresses at once, without probing.
	Probe ProbeOptions
}

// Rights is the node's right to answer for its addresses.
type Rights interface {
	// Valid reports whether the node may answer now; it is asked at the
	// moment each frame is about to be sent.
	Valid() bool
	// Resumed is signalled when the right starts again after a gap.
	Resumed() <-chan struct{}
}

// alwaysRights is the Rights of a responder given none.
type alwaysRights struct{}

func (alwaysRights) Valid() bool              { return true }
func (alwaysRights) Resumed() <-chan struct{} { return nil }

// FamilyStats counts one family's traffic since New.
type FamilyStats struct {
	// Requests counts valid ARP requests or neighbor solicitations from
	// other hosts on answering interfaces, whatever address they asked for.
	Requests uint64
	// Replies counts answers sent.
	Replies uint64
	// Announcements counts gratuitous ARP / unsolicited advertisement frames
	// sent (two ARP frames per IPv4 announcement).
	Announcements uint64
	// Errors counts frames that could not be sent.
	Errors uint64
	// Withheld counts replies and announcements not sent because the node
	// had no valid right to answer at that moment (Options.Rights).
	Withheld uint64
	// Defences counts claims by other hosts on answered addresses that
	// were answered with an announcement (at most one per address per
	// 250 ms on a link).
	Defences uint64
	// Probes counts ARP probes / DAD solicitations sent.
	Probes uint64
	// Conflicts counts conflicts found: another host using an address
	// this node was told to answer for (once per address and interface
	// until the conflict is over).
	Conflicts uint64
}

// Stats counts a Responder's traffic per family.
type Stats struct {
	IPv4 FamilyStats
	IPv6 FamilyStats
}

type familyCounters struct {
	requests, replies, announcements, errors, withheld, defences, probes, conflicts atomic.Uint64
}

func (c *familyCounters) load() FamilyStats {
	return FamilyStats{
		Requests:      c.requests.Load(),
		Replies:       c.replies.Load(),
		Announcements: c.announcements.Load(),
		Errors:        c.errors.Load(),
		Withheld:      c.withheld.Load(),
		Defences:      c.defences.Load(),
		Probes:        c.probes.Load(),
		Conflicts:     c.conflicts.Load(),
	}
}

// plan is the immutable set of addresses to answer for, per interface name.
type plan map[string]map[netip.Addr]struct{}

func (p plan) has(ifname string, a netip.Addr) bool {
	_, ok := p[ifname][a]
	return ok
}

// Responder answers ARP and NDP for a set of addresses per interface. Create
// it with New, start it with Run, and tell it what to answer with Set.
type Responder struct {
	log  *slog.Logger
	opts Options

	plan atomic.Pointer[plan]
	wake chan struct{} // capacity 1: "reconcile soon"
	v4   familyCounters
	v6   familyCounters

	mu      sync.Mutex
	started bool
	links   map[string]*link // by interface name; changed only by Run's goroutine

	// status is the last logged state per interface; Run's goroutine only.
	status map[string]string

	// known are the addresses Beacon was already answering for (SetKnown).
	known atomic.Pointer[map[netip.Addr]bool]
	// cleared are desired addresses whose probes found no other host;
	// guarded by mu.
	cleared map[netip.Addr]bool

	cmu              sync.Mutex
	conflicts        map[conflictKey]Conflict
	conflictsChanged chan struct{} // capacity 1
}

// New returns a Responder that answers for nothing until Set is called and
// nothing at all until Run is called. It starts no goroutines.
func New(logger *slog.Logger, opts Options) *Responder {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(opts.Announcements) == 0 {
		opts.Announcements = DefaultAnnouncements()
	} else {
		opts.Announcements = slices.Clone(opts.Announcements)
		slices.Sort(opts.Announcements)
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Rights == nil {
		opts.Rights = alwaysRights{}
	}
	opts.Probe = opts.Probe.withDefaults()
	r := &Responder{
		log:              logger,
		opts:             opts,
		wake:             make(chan struct{}, 1),
		links:            make(map[string]*link),
		status:           make(map[string]string),
		cleared:          make(map[netip.Addr]bool),
		conflicts:        make(map[conflictKey]Conflict),
		conflictsChanged: make(chan struct{}, 1),
	}
	r.plan.Store(&plan{})
	r.known.Store(&map[netip.Addr]bool{})
	return r
}

// Set replaces the addresses to answer for: interface name to addresses. It
// takes effect at once: addresses no longer listed get no further answer
// once Set returns; new ones are announced right away (if their interface is
// up and Run is running, else as soon as it is) and again after
// Options.Announcements. Interfaces need not exist yet.
//
// Calling Set again with the same map is harmless and makes Run re-check the
// interfaces at once, for callers that watch links themselves. On error
// (ErrInvalid) nothing changes.
func (r *Responder) Set(desired map[string][]netip.Addr) error {
	next, err := newPlan(desired)
	if err != nil {
		return err
	}
	now := time.Now()
	r.mu.Lock()
	prev := *r.plan.Load()
	r.plan.Store(&next)
	for a := range r.cleared {
		if !next.hasAnywhere(a) {
			delete(r.cleared, a)
		}
	}
	for name, addrs := range next {
		lk := r.links[name]
		if lk == nil {
			continue
		}
		for a := range addrs {
			if !prev.has(name, a) {
				lk.start(a, now)
			}
		}
	}
	r.mu.Unlock()
	r.poke()
	return nil
}

func (p plan) hasAnywhere(a netip.Addr) bool {
	for _, addrs := range p {
		if _, ok := addrs[a]; ok {
			return true
		}
	}
	return false
}

func newPlan(desired map[string][]netip.Addr) (plan, error) {
	p := make(plan, len(desired))
	var errs []error
	for name, addrs := range desired {
		if name == "" || len(name) >= 16 || strings.ContainsAny(name, "/ \t\n:") {
			errs = append(errs, fmt.Errorf("interface name %q: %w", name, ErrInvalid))
			continue
		}
		set := make(map[netip.Addr]struct{}, len(addrs))
		for _, a := range addrs {
			a = a.Unmap()
			switch {
			case !a.IsValid():
				errs = append(errs, fmt.Errorf("interface %s: an invalid address: %w", name, ErrInvalid))
				continue
			case a.Zone() != "":
				errs = append(errs, fmt.Errorf("interface %s: %s has a zone: %w", name, a, ErrInvalid))
				continue
			case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || isBroadcast4(a):
				errs = append(errs, fmt.Errorf("interface %s: %s is not a unicast address: %w", name, a, ErrInvalid))
				continue
			}
			set[a] = struct{}{}
		}
		if len(set) > 0 {
			p[name] = set
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Stats returns the counters so far.
func (r *Responder) Stats() Stats {
	return Stats{IPv4: r.v4.load(), IPv6: r.v6.load()}
}

// answers reports whether addr is answered on ifname now.
func (r *Responder) answers(ifname string, addr netip.Addr) bool {
	return r.plan.Load().has(ifname, addr)
}

func (r *Responder) counters(f Family) *familyCounters {
	if f == IPv4 {
		return &r.v4
	}
	return &r.v6
}

func (r *Responder) event(kind EventKind, ifname string, addr netip.Addr) {
	c := r.counters(familyOf(addr))
	switch kind {
	case EventRequest:
		c.requests.Add(1)
	case EventReply:
		c.replies.Add(1)
	case EventAnnouncement:
		c.announcements.Add(1)
	case EventError:
		c.errors.Add(1)
	case EventWithheld:
		c.withheld.Add(1)
	case EventDefence:
		c.defences.Add(1)
	case EventProbe:
		c.probes.Add(1)
	}
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(Event{Kind: kind, Family: familyOf(addr), Interface: ifname, Addr: addr})
	}
}

func (r *Responder) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run answers and announces until ctx is done, then stops answering at once
// (its sockets are closed before it returns). It keeps each wanted
// interface's sockets open while the interface exists and is up, re-creating
// them when it comes back. It returns nil once ctx is done; it may be called
// only once.
func (r *Responder) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("l2: Run called twice")
	}
	r.started = true
	r.mu.Unlock()

	linkEvents, stopWatch := r.watchLinks()
	defer stopWatch()
	tick := time.NewTicker(r.opts.CheckInterval)
	defer tick.Stop()
	defer r.closeAll()

	for {
		r.reconcile()
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-r.opts.Rights.Resumed():
			r.announceAll()
		case <-tick.C:
			r.expireConflicts(time.Now())
		case _, ok := <-linkEvents:
			if !ok {
				r.log.Warn("link notifications ended; checking interfaces periodically only", "every", r.opts.CheckInterval)
				linkEvents = nil
			}
		}
	}
}

// watchLinks subscribes to the kernel's link notifications, so that an
// interface coming back up is served at once rather than at the next check.
// Without them (an error is logged) the periodic check still works.
func (r *Responder) watchLinks() (<-chan struct{}, func()) {
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	var closing atomic.Bool
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			if !closing.Load() {
				r.log.Warn("link notifications", "err", err)
			}
		},
	})
	if err != nil {
		r.log.Warn("cannot subscribe to link notifications; checking interfaces periodically only",
			"every", r.opts.CheckInterval, "err", err)
		return nil, func() {}
	}
	events := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(events)
		for u := range updates {
			if u.Link == nil || u.Attrs() == nil {
				continue
			}
			if _, wanted := (*r.plan.Load())[u.Attrs().Name]; !wanted && !r.hasLinkIndex(u.Attrs().Index) {
				continue
			}
			select {
			case events <- struct{}{}:
			case <-done:
			}
		}
	})
	return events, func() {
		closing.Store(true)
		close(done)
		// The subscription closes updates once its socket is closed; keep
		// draining so that its goroutine is never stuck sending.
		wg.Wait()
	}
}

func (r *Responder) hasLinkIndex(index int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lk := range r.links {
		if lk.index == index {
			return true
		}
	}
	return false
}

// usable reports whether an interface can be served, or why not.
func usable(ifi net.Interface) string {
	switch {
	case len(ifi.HardwareAddr) != 6:
		return "no 6-byte Ethernet address"
	case ifi.Flags&net.FlagUp == 0:
		return "down"
	case ifi.Flags&net.FlagRunning == 0:
		return "no carrier"
	}
	return ""
}

// reconcile makes the open links match the plan and the interfaces as they
// are now. Only Run's goroutine calls it.
func (r *Responder) reconcile() {
	p := *r.plan.Load()
	ifaces, err := net.Interfaces()
	if err != nil {
		r.log.Warn("cannot list interfaces", "err", err)
		return
	}
	byName := make(map[string]net.Interface, len(ifaces))
	for _, ifi := range ifaces {
		byName[ifi.Name] = ifi
	}

	r.mu.Lock()
	open := maps.Clone(r.links)
	r.mu.Unlock()

	for name, lk := range open {
		ifi, ok := byName[name]
		var why string
		switch {
		case len(p[name]) == 0:
			why = "no addresses to answer for"
		case !ok:
			why = "interface gone"
		case ifi.Index != lk.index:
			why = "interface re-created"
		case !bytes.Equal(ifi.HardwareAddr, lk.mac):
			why = "MAC changed"
		case usable(ifi) != "":
			why = "interface " + usable(ifi)
		case lk.failed():
			why = "socket failed"
		default:
			continue
		}
		r.mu.Lock()
		delete(r.links, name)
		r.mu.Unlock()
		lk.close()
		r.setStatus(name, "stopped", why)
	}

	for _, name := range slices.Sorted(maps.Keys(p)) {
		r.mu.Lock()
		lk := r.links[name]
		r.mu.Unlock()
		if lk == nil {
			ifi, ok := byName[name]
			if !ok {
				r.setStatus(name, "waiting", "interface not found")
				continue
			}
			if why := usable(ifi); why != "" {
				r.setStatus(name, "waiting", why)
				continue
			}
			lk, err = openLink(r, ifi)
			if err != nil {
				r.setStatus(name, "waiting", err.Error())
				continue
			}
			now := time.Now()
			r.mu.Lock()
			r.links[name] = lk
			for a := range (*r.plan.Load())[name] {
				lk.start(a, now)
			}
			r.mu.Unlock()
			r.setStatus(name, "answering", fmt.Sprintf("index %d, MAC %s", ifi.Index, ifi.HardwareAddr))
		}
		if err := lk.syncGroups(p[name]); err != nil {
			r.log.Warn("cannot join solicited-node groups", "interface", name, "err", err)
		}
	}

	for name := range r.status {
		if _, ok := p[name]; !ok {
			delete(r.status, name)
		}
	}
}

// setStatus logs an interface's state when it changes.
func (r *Responder) setStatus(name, state, why string) {
	s := state + ": " + why
	if r.status[name] == s {
		return
	}
	r.status[name] = s
	if state == "answering" {
		r.log.Info("l2 answering", "interface", name, "detail", why)
		return
	}
	r.log.Warn("l2 not answering", "interface", name, "state", state, "reason", why)
}

// announceAll schedules every answered address's announcements anew: the
// node's right to answer resumed after a gap in which due announcements
// were withheld.
func (r *Responder) announceAll() {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := *r.plan.Load()
	for name, lk := range r.links {
		for a := range p[name] {
			lk.schedule(a, now)
		}
	}
}

func (r *Responder) closeAll() {
	r.mu.Lock()
	links := r.links
	r.links = make(map[string]*link)
	r.mu.Unlock()
	for _, lk := range links {
		lk.close()
	}
}
