package netlab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// RouteEvent is one change to a namespace's kernel routing table, stamped
// when the monitor read it.
type RouteEvent struct {
	At      time.Time
	Deleted bool
	Prefix  netip.Prefix
	Line    string
}

// RouteMonitor follows a namespace's kernel routes (`ip monitor route`).
type RouteMonitor struct {
	proc *Proc
	mu   sync.Mutex
	evs  []RouteEvent
	cond chan struct{} // closed and replaced on every event
}

// MonitorRoutes starts `ip -o monitor route` in the host's namespace. The
// monitor is ready when it returns: events from then on are recorded.
func (h *Host) MonitorRoutes(ctx context.Context) (*RouteMonitor, error) {
	pr, pw := io.Pipe()
	p, err := h.Start("ip-monitor", []string{"ip", "-o", "monitor", "route"}, &ProcOptions{Stdout: pw})
	if err != nil {
		return nil, err
	}
	m := &RouteMonitor{proc: p, cond: make(chan struct{})}
	go func() {
		<-p.Done()
		_ = pw.Close()
	}()
	go m.read(pr)
	// `ip monitor` subscribes before it reads; probe until an event shows
	// that the subscription is live. Each probe deletes and adds the route:
	// re-adding an identical route is no change and sends no event, so a
	// first probe made before the monitor subscribed would never be seen.
	probe := netip.MustParsePrefix("203.0.113.255/32")
	err = Eventually(ctx, 5*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		_, _ = h.Run(ctx, "ip", "route", "del", "blackhole", probe.String())
		if _, err := h.Run(ctx, "ip", "route", "add", "blackhole", probe.String()); err != nil {
			return err
		}
		if _, ok := m.Find(probe, false, time.Time{}); !ok {
			return fmt.Errorf("no event yet")
		}
		return nil
	})
	if _, rerr := h.Run(ctx, "ip", "route", "del", "blackhole", probe.String()); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("netlab: route monitor in %s: %w", h.Role, err)
	}
	return m, nil
}

func (m *RouteMonitor) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		at := time.Now()
		line := sc.Text()
		ev := RouteEvent{At: at, Line: line}
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "Deleted" {
			ev.Deleted = true
			f = f[1:]
		}
		// Skip leading route types (blackhole, unicast, ...).
		for len(f) > 0 {
			if p, err := parseRouteDst(f[0]); err == nil {
				ev.Prefix = p
				break
			}
			f = f[1:]
		}
		m.mu.Lock()
		m.evs = append(m.evs, ev)
		close(m.cond)
		m.cond = make(chan struct{})
		m.mu.Unlock()
	}
}

func parseRouteDst(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Find returns the first event for prefix (added, or deleted when deleted is
// true) seen at or after since.
func (m *RouteMonitor) Find(prefix netip.Prefix, deleted bool, since time.Time) (RouteEvent, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range m.evs {
		if ev.Prefix == prefix && ev.Deleted == deleted && !ev.At.Before(since) {
			return ev, true
		}
	}
	return RouteEvent{}, false
}

// Wait blocks until Find would succeed, or ctx is done.
func (m *RouteMonitor) Wait(ctx context.Context, prefix netip.Prefix, deleted bool, since time.Time) (RouteEvent, error) {
	for {
		m.mu.Lock()
		ch := m.cond
		m.mu.Unlock()
		if ev, ok := m.Find(prefix, deleted, since); ok {
			return ev, nil
		}
		select {
		case <-ctx.Done():
			what := "added"
			if deleted {
				what = "deleted"
			}
			return RouteEvent{}, fmt.Errorf("netlab: no route %s %s since %s: %w", prefix, what, since.Format(time.StampMicro), ctx.Err())
		case <-ch:
		case <-m.proc.Done():
			return RouteEvent{}, fmt.Errorf("netlab: route monitor exited")
		}
	}
}

// Last returns the latest event for prefix.
func (m *RouteMonitor) Last(prefix netip.Prefix) (RouteEvent, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.evs) - 1; i >= 0; i-- {
		if m.evs[i].Prefix == prefix {
			return m.evs[i], true
		}
	}
	return RouteEvent{}, false
}
