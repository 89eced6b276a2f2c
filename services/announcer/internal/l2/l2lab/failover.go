package l2lab

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Failover is what MeasureFailover measured for one address.
type Failover struct {
	Addr netip.Addr
	// Samples holds one duration per trial: from the moment the new owner's
	// Set was called to the moment the client's kernel reported its
	// neighbour entry for Addr with the new owner's MAC.
	Samples []time.Duration
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of the
// samples, or 0 when there are none.
func (f Failover) Percentile(p float64) time.Duration {
	if len(f.Samples) == 0 {
		return 0
	}
	s := slices.Clone(f.Samples)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func (f Failover) String() string {
	return fmt.Sprintf("%s: %d trials, p50 %v, p99 %v, max %v", f.Addr, len(f.Samples),
		f.Percentile(50), f.Percentile(99), f.Percentile(100))
}

// LocktimeGap is how long MeasureFailover lets pass between one trial's
// switch and the next trial's kill. Linux ignores a neighbour update within
// one second (locktime) of the last one, and a real failover does not
// follow the previous one that closely, so trials stay further apart.
const LocktimeGap = 1200 * time.Millisecond

// MeasureFailover measures L2 failover on the lab's LAN, trials times, for
// each of vips (on eth0's subnets). Node1 starts as the owner: the client
// resolves every address to it. Each trial SIGKILLs the owner's responder,
// calls Set on the other node's running responder, and times how long until
// the client's kernel points each address at the new owner's MAC (seen as a
// netlink neighbour notification, so no polling delay). The killed node then
// gets a fresh, idle responder and the roles swap for the next trial.
func (l *Lab) MeasureFailover(ctx context.Context, trials int, vips ...netip.Addr) ([]Failover, error) {
	macs := map[string]net.HardwareAddr{}
	for _, ns := range []string{l.Node1, l.Node2} {
		mac, err := l.MAC(ns, LAN)
		if err != nil {
			return nil, err
		}
		macs[ns] = mac
	}
	updates, stop, err := l.WatchNeigh()
	if err != nil {
		return nil, err
	}
	defer stop()

	desired := map[string][]netip.Addr{LAN: vips}
	ownerNS, standbyNS := l.Node1, l.Node2
	owner, err := l.StartResponder(ownerNS)
	if err != nil {
		return nil, err
	}
	if err := owner.Set(desired); err != nil {
		return nil, err
	}
	standby, err := l.StartResponder(standbyNS)
	if err != nil {
		return nil, err
	}
	for _, vip := range vips {
		l.Ping(ctx, LAN, vip)
		if _, err := l.WaitNeigh(ctx, LAN, vip, macs[ownerNS], 5*time.Second); err != nil {
			return nil, fmt.Errorf("before the first trial: %w", err)
		}
	}
	lastSwitch := time.Now()

	results := make([]Failover, len(vips))
	for i, vip := range vips {
		results[i].Addr = vip
	}
	for trial := range trials {
		select {
		case <-time.After(time.Until(lastSwitch.Add(LocktimeGap))):
		case <-ctx.Done():
			return results, ctx.Err()
		}
		drain(updates)
		owner.Kill()
		newMAC := macs[standbyNS]
		start := time.Now()
		if err := standby.Set(desired); err != nil {
			return results, fmt.Errorf("trial %d: %w", trial, err)
		}
		pending := map[netip.Addr]int{}
		for i, vip := range vips {
			pending[vip] = i
		}
		deadline := time.After(5 * time.Second)
		for len(pending) > 0 {
			select {
			case u, ok := <-updates:
				if !ok {
					return results, fmt.Errorf("trial %d: neighbour notifications ended", trial)
				}
				at := time.Since(start)
				a, _ := netip.AddrFromSlice(u.IP)
				i, ok := pending[a.Unmap()]
				if ok && u.Type == unix.RTM_NEWNEIGH && bytes.Equal(u.HardwareAddr, newMAC) {
					results[i].Samples = append(results[i].Samples, at)
					delete(pending, a.Unmap())
				}
			case <-deadline:
				var states []string
				for vip := range pending {
					n, err := l.Neigh(LAN, vip)
					states = append(states, fmt.Sprintf("%s: %v %s %v", vip, n.MAC, n.State, err))
				}
				return results, fmt.Errorf("trial %d: client still not at %s after 5s: %v", trial, newMAC, states)
			case <-ctx.Done():
				return results, ctx.Err()
			}
		}
		lastSwitch = time.Now()

		// The killed node comes back idle; roles swap.
		fresh, err := l.StartResponder(ownerNS)
		if err != nil {
			return results, err
		}
		owner, standby = standby, fresh
		ownerNS, standbyNS = standbyNS, ownerNS
	}
	owner.Kill()
	standby.Kill()
	return results, nil
}

// WatchNeigh subscribes to the client namespace's neighbour notifications
// (what `ip monitor neigh` shows there). Call stop when done.
func (l *Lab) WatchNeigh() (updates <-chan netlink.NeighUpdate, stop func(), err error) {
	nsh, err := netns.GetFromName(l.Client)
	if err != nil {
		return nil, nil, fmt.Errorf("open client namespace: %w", err)
	}
	defer func() { _ = nsh.Close() }()
	ch := make(chan netlink.NeighUpdate, 1024)
	done := make(chan struct{})
	closing := make(chan struct{})
	err = netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			select {
			case <-closing:
			default:
				l.t.Logf("neighbour notifications: %v", err)
			}
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe to client neighbours: %w", err)
	}
	return ch, func() {
		close(closing)
		close(done)
		for range ch { // until the subscription closes it
		}
	}, nil
}

func drain(ch <-chan netlink.NeighUpdate) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
