package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Silence is how an owner is cut off from the IPAM for a while without
// dying: the cases where a node could wake up and answer for addresses the
// IPAM has since moved.
type Silence int

// The ways to silence an owner.
const (
	// Freeze SIGSTOPs the owner's announcerd (SIGCONT at the end).
	Freeze Silence = iota + 1
	// CutMgmt drops everything the owner sends on its management link
	// (eth1, where the IPAM is): its heartbeats stop, while its ARP and NDP
	// answers on eth0 still leave.
	CutMgmt
	// CutAll drops everything the owner sends, on both links.
	CutAll
)

func (s Silence) String() string {
	switch s {
	case Freeze:
		return "freeze"
	case CutMgmt:
		return "cut-mgmt"
	case CutAll:
		return "cut-all"
	}
	return fmt.Sprintf("Silence(%d)", int(s))
}

// StaleTrial is what one silence of the owner showed.
type StaleTrial struct {
	Kind     Silence
	For      time.Duration
	From, To string // the owner before, and after ("" when nobody answered at the end)
	// Moved is when another node first answered the prober, from the start
	// of the silence (zero: the addresses did not move).
	Moved time.Duration
	// StaleReplies counts ARP replies from the old owner's MAC that the
	// prober read after another node had first answered.
	StaleReplies int
	// WrongOwner is the longest time, over the service's addresses, that
	// the client's neighbour entry pointed at a node other than the owner
	// of the moment: after the move, any node but the new owner; before
	// it (or without one), any node but the old owner. A correct move
	// shows the few milliseconds the new owner's announcement takes.
	WrongOwner time.Duration
	// BackToOld counts changes of the client's entries, after the move, that
	// pointed them at the old owner.
	BackToOld int
}

// StaleSilences are the silences a round of the stale-answer benchmark and
// test puts an owner through: freezes shorter and longer than the IPAM's
// heartbeat watchdog (0.6 s), and egress cuts of the management link alone
// (the node still answers ARP meanwhile) and of both links.
func StaleSilences() []struct {
	Kind Silence
	For  time.Duration
} {
	return []struct {
		Kind Silence
		For  time.Duration
	}{
		{Freeze, 300 * time.Millisecond},
		{Freeze, time.Second},
		{Freeze, 3 * time.Second},
		{CutMgmt, time.Second},
		{CutMgmt, 3 * time.Second},
		{CutAll, 1500 * time.Millisecond},
	}
}

// benchStale runs cfg.StaleRounds rounds of StaleSilences on a three-node
// cluster and reports the most stale replies any trial saw
// (l2_stale_replies_after_freeze, 0 is the only pass) and the longest time
// the client pointed at a node that did not own the address
// (l2_wrong_owner_ms).
func benchStale(ctx context.Context, cfg BenchConfig, logf func(string, ...any)) (figs []Figure, err error) {
	if cfg.StaleRounds <= 0 {
		return nil, nil
	}
	c, err := New(ctx, Options{Bin: cfg.Bin, Nodes: 3, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		return nil, err
	}
	stale, wrong := 0, time.Duration(0)
	for round := range cfg.StaleRounds {
		for _, s := range StaleSilences() {
			res, err := c.MeasureStale(ctx, svc, s.Kind, s.For)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", round, err)
			}
			logf("stale round %d: %s %v: %s -> %s, moved after %v, %d stale replies, client wrong for %v",
				round, s.Kind, s.For, res.From, res.To, ms(res.Moved), res.StaleReplies, ms(res.WrongOwner))
			stale, wrong = max(stale, res.StaleReplies), max(wrong, res.WrongOwner)
		}
	}
	return []Figure{
		{Name: "l2_stale_replies_after_freeze", Count: stale, Unit: "count"},
		{Name: "l2_wrong_owner_ms", Value: wrong},
	}, nil
}

// StaleWindow is how long a trial watches after the owner is back: the
// reconnect, the new plan, and any late answer the old owner would send.
const StaleWindow = 2 * time.Second

// MeasureStale silences svc's owner by kind for d, with an ARP prober asking
// for the IPv4 address every 2 ms throughout and the client re-resolving both
// addresses: its entries are flushed halfway through the silence (as if they
// had expired) and it pings both addresses during the silence and after it,
// so that its requests queue up in the silenced owner's sockets. It returns
// what the prober and the client saw. svc.Owner follows the addresses.
func (c *Cluster) MeasureStale(ctx context.Context, svc *L2Service, kind Silence, d time.Duration) (StaleTrial, error) {
	old := svc.Owner
	res := StaleTrial{Kind: kind, For: d, From: old.Name}
	prober, err := c.StartARPProber(svc.V4(), 2*time.Millisecond)
	if err != nil {
		return res, err
	}
	defer func() { _ = prober.Stop() }()
	watch, err := c.WatchNeigh()
	if err != nil {
		return res, err
	}
	defer watch.Close()
	stopRecording := record(watch)
	recorded := false
	defer func() {
		if !recorded {
			stopRecording()
		}
	}()
	initial := map[netip.Addr]net.HardwareAddr{}
	for _, a := range svc.Addrs {
		n, err := c.Neigh(a)
		if err != nil {
			return res, err
		}
		initial[a] = n.MAC
	}

	pctx, stopPings := context.WithCancel(ctx)
	var pings sync.WaitGroup
	defer func() { stopPings(); pings.Wait() }()
	ping := func() {
		for _, a := range svc.Addrs {
			pings.Go(func() { c.Ping(pctx, a) })
		}
	}

	start := time.Now()
	if err := c.silence(ctx, kind, old, true); err != nil {
		return res, fmt.Errorf("e2e: silencing %s: %w", old.Name, err)
	}
	restored := false
	defer func() {
		if !restored {
			_ = c.silence(context.WithoutCancel(ctx), kind, old, false)
		}
	}()
	if err := sleep(ctx, d/2); err != nil {
		return res, err
	}
	for _, a := range svc.Addrs {
		if _, err := c.Client.Run(ctx, "ip", "neigh", "flush", "to", a.String(), "dev", "eth0"); err != nil {
			return res, err
		}
	}
	ping()
	if err := sleep(ctx, time.Until(start.Add(d))); err != nil {
		return res, err
	}
	if err := c.silence(ctx, kind, old, false); err != nil {
		return res, fmt.Errorf("e2e: restoring %s: %w", old.Name, err)
	}
	restored = true
	back := time.Now()
	for time.Since(back) < StaleWindow {
		ping()
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return res, err
		}
	}
	// The owner at the end is whoever alone answers the prober. (On a
	// loaded machine a node's right can lapse for a moment when the IPAM's
	// acknowledgements come late, so this waits for a quiet spell to end.)
	var recent []string
	for wait := time.Now(); ; {
		now := time.Now()
		if recent = prober.MACsBetween(now.Add(-300*time.Millisecond), now); len(recent) == 1 {
			break
		}
		if time.Since(wait) > 5*time.Second {
			return res, fmt.Errorf("e2e: %s %v: after the silence %d nodes answer the prober: %v", kind, d, len(recent), recent)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return res, err
		}
	}
	end := time.Now()
	changes := stopRecording()
	recorded = true
	owner := c.nodeByMACString(recent[0])
	if owner == nil {
		return res, fmt.Errorf("e2e: %s %v: %s answers and is no node", kind, d, recent[0])
	}
	res.To = owner.Name
	var moved time.Time
	for _, r := range prober.Replies() {
		if r.At.After(start) && !bytes.Equal(r.MAC, old.MAC) {
			moved = r.At
			break
		}
	}
	if !moved.IsZero() {
		res.Moved = moved.Sub(start)
		for _, r := range prober.Replies() {
			if r.At.After(moved) && bytes.Equal(r.MAC, old.MAC) {
				res.StaleReplies++
			}
		}
	}
	res.WrongOwner = wrongOwner(changes, svc.Addrs, initial, old.MAC, owner.MAC, start, moved, end)
	if !moved.IsZero() {
		last := maps.Clone(initial)
		for _, ch := range changes {
			if ch.at.After(moved) && bytes.Equal(ch.mac, old.MAC) && !bytes.Equal(last[ch.addr], old.MAC) {
				res.BackToOld++
			}
			last[ch.addr] = ch.mac
		}
	}
	svc.Owner = owner
	// The old owner must be back in the IPAM before the next trial.
	if err := old.WaitLive(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// neighChange is one client neighbour notification, stamped when read.
type neighChange struct {
	at   time.Time
	addr netip.Addr
	mac  net.HardwareAddr // nil: the entry points nowhere (deleted, incomplete, failed)
}

// record reads w's notifications into a list until stop is called, which
// returns the list.
func record(w *NeighWatch) (stop func() []neighChange) {
	done := make(chan struct{})
	out := make(chan []neighChange)
	go func() {
		var list []neighChange
		for {
			select {
			case u, ok := <-w.ch:
				if !ok {
					<-done
					out <- list
					return
				}
				a, ok := netip.AddrFromSlice(u.IP)
				if !ok {
					continue
				}
				ch := neighChange{at: time.Now(), addr: a.Unmap()}
				if u.Type == unix.RTM_NEWNEIGH && len(u.HardwareAddr) == 6 {
					ch.mac = bytes.Clone(u.HardwareAddr)
				}
				list = append(list, ch)
			case <-done:
				out <- list
				return
			}
		}
	}()
	return func() []neighChange {
		close(done)
		return <-out
	}
}

// wrongOwner replays the client's neighbour changes and returns the
// longest time, over addrs, that an entry pointed at a MAC that was not the
// owner's then: oldMAC before moved (or throughout, with no move), newMAC
// from moved on, within [start, end). An entry with no MAC points nowhere
// and is not wrong.
func wrongOwner(changes []neighChange, addrs []netip.Addr, initial map[netip.Addr]net.HardwareAddr, oldMAC, newMAC net.HardwareAddr, start, moved, end time.Time) time.Duration {
	ownerAt := func(t time.Time) net.HardwareAddr {
		if !moved.IsZero() && !t.Before(moved) {
			return newMAC
		}
		return oldMAC
	}
	var worst time.Duration
	for _, a := range addrs {
		mac, since := initial[a], start
		var wrongSince time.Time
		check := func(t time.Time) { // mac held from since to t
			from := since
			if !moved.IsZero() && from.Before(moved) && t.After(moved) {
				checkSpan(mac, from, moved, ownerAt, &wrongSince, &worst)
				from = moved
			}
			checkSpan(mac, from, t, ownerAt, &wrongSince, &worst)
		}
		for _, ch := range changes {
			if ch.addr != a || ch.at.Before(start) {
				continue
			}
			check(ch.at)
			mac, since = ch.mac, ch.at
		}
		check(end)
	}
	return worst
}

// checkSpan extends or ends a run of wrong time over [from, to) while the
// entry pointed at mac.
func checkSpan(mac net.HardwareAddr, from, to time.Time, ownerAt func(time.Time) net.HardwareAddr, wrongSince *time.Time, worst *time.Duration) {
	if !to.After(from) {
		return
	}
	wrong := mac != nil && !bytes.Equal(mac, ownerAt(from))
	switch {
	case wrong && wrongSince.IsZero():
		*wrongSince = from
	case !wrong && !wrongSince.IsZero():
		*worst = max(*worst, from.Sub(*wrongSince))
		*wrongSince = time.Time{}
	}
	if !wrongSince.IsZero() {
		*worst = max(*worst, to.Sub(*wrongSince))
	}
}

func (c *Cluster) nodeByMACString(mac string) *Node {
	for _, n := range c.Nodes {
		if n.MAC.String() == mac {
			return n
		}
	}
	return nil
}

// silence starts (on) or ends (off) a silence of n.
func (c *Cluster) silence(ctx context.Context, kind Silence, n *Node, on bool) error {
	switch kind {
	case Freeze:
		sig := syscall.SIGCONT
		if on {
			sig = syscall.SIGSTOP
		}
		return n.Proc().Signal(sig)
	case CutMgmt, CutAll:
		devs := []string{"eth1"}
		if kind == CutAll {
			devs = append(devs, "eth0")
		}
		var errs []error
		for _, dev := range devs {
			var err error
			if on {
				_, err = n.Host.Run(ctx, "tc", "qdisc", "add", "dev", dev, "root", "pfifo", "limit", "0")
			} else {
				_, err = n.Host.Run(ctx, "tc", "qdisc", "del", "dev", dev, "root")
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("unknown silence %v", kind)
}

// sleep waits d (the length of an experiment's phase, not a wait for a
// condition) or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
