package l2

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestSetValidates(t *testing.T) {
	tests := []struct {
		name    string
		desired map[string][]netip.Addr
		wantErr bool
	}{
		{"both families", map[string][]netip.Addr{"eth0": addrs("192.0.2.100", "2001:db8::100")}, false},
		{"empty", nil, false},
		{"interface without addresses", map[string][]netip.Addr{"eth0": nil}, false},
		{"empty interface name", map[string][]netip.Addr{"": addrs("192.0.2.100")}, true},
		{"interface name too long", map[string][]netip.Addr{"a-very-long-name0": addrs("192.0.2.100")}, true},
		{"invalid address", map[string][]netip.Addr{"eth0": {{}}}, true},
		{"zone", map[string][]netip.Addr{"eth0": addrs("fe80::1%eth0")}, true},
		{"multicast", map[string][]netip.Addr{"eth0": addrs("ff02::1")}, true},
		{"unspecified", map[string][]netip.Addr{"eth0": addrs("0.0.0.0")}, true},
		{"broadcast", map[string][]netip.Addr{"eth0": addrs("255.255.255.255")}, true},
		{"loopback", map[string][]netip.Addr{"eth0": addrs("::1")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(nil, Options{})
			before := map[string][]netip.Addr{"keep0": addrs("198.51.100.1")}
			if err := r.Set(before); err != nil {
				t.Fatal(err)
			}
			err := r.Set(tt.desired)
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("Set error %v, want error: %v", err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				if !r.answers("keep0", netip.MustParseAddr("198.51.100.1")) {
					t.Errorf("a refused Set changed what is answered")
				}
			}
		})
	}
}

func TestSetTakesEffectAtOnce(t *testing.T) {
	r := New(nil, Options{})
	v4, v6 := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8::100")
	type answer struct{ Eth0V4, Eth0V6, Eth1V4 bool }
	check := func(want answer) {
		t.Helper()
		got := answer{r.answers("eth0", v4), r.answers("eth0", v6), r.answers("eth1", v4)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
	}
	check(answer{})
	if err := r.Set(map[string][]netip.Addr{"eth0": {v4, v6}}); err != nil {
		t.Fatal(err)
	}
	check(answer{Eth0V4: true, Eth0V6: true})
	// IPv4-mapped IPv6 is the IPv4 address.
	if err := r.Set(map[string][]netip.Addr{"eth1": addrs("::ffff:192.0.2.100")}); err != nil {
		t.Fatal(err)
	}
	check(answer{Eth1V4: true})
}

func TestSchedule(t *testing.T) {
	r := New(nil, Options{Announcements: []time.Duration{time.Second, 0}})
	l := &link{r: r, announce: make(chan struct{}, 1)}
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")

	l.schedule(a, t0)
	l.schedule(b, t0.Add(500*time.Millisecond))
	type step struct {
		Due  []netip.Addr
		Next time.Time
	}
	run := func(at time.Time) step {
		due, next := l.due(at)
		return step{due, next}
	}
	got := []step{
		run(t0),
		run(t0.Add(500 * time.Millisecond)),
		run(t0.Add(time.Second)),
		run(t0.Add(1500 * time.Millisecond)),
		run(t0.Add(time.Hour)),
	}
	want := []step{
		{Due: []netip.Addr{a}, Next: t0.Add(500 * time.Millisecond)},
		{Due: []netip.Addr{b}, Next: t0.Add(time.Second)},
		{Due: []netip.Addr{a}, Next: t0.Add(1500 * time.Millisecond)},
		{Due: []netip.Addr{b}},
		{},
	}
	if diff := cmp.Diff(want, got, addrEqual()); diff != "" {
		t.Errorf("announcements (-want +got):\n%s", diff)
	}

	// Scheduling an address again restarts its announcements.
	l.schedule(a, t0)
	l.schedule(a, t0.Add(time.Minute))
	if due, _ := l.due(t0.Add(time.Second)); len(due) != 0 {
		t.Errorf("stale announcements kept after rescheduling: %v", due)
	}
}
