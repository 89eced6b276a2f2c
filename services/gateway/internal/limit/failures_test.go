package limit

import (
	"net/netip"
	"testing"
	"time"
)

func TestFailuresPerNetwork(t *testing.T) {
	now := time.Unix(1000, 0)
	f := NewFailures(Config{Rate: 1, Burst: 2})
	f.now = func() time.Time { return now }
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	v6a := netip.MustParseAddr("2001:db8::1")
	v6b := netip.MustParseAddr("2001:db8::ffff") // same /64
	v6c := netip.MustParseAddr("2001:db8:0:1::1")

	for i := range 2 {
		if d := f.Blocked(a); d != 0 {
			t.Fatalf("failure %d: blocked %v within the burst", i, d)
		}
		f.Failed(a)
	}
	if d := f.Blocked(a); d <= 0 || d > time.Second {
		t.Fatalf("after the burst: blocked %v, want up to 1s", d)
	}
	if d := f.Blocked(b); d != 0 {
		t.Errorf("another IPv4 address: blocked %v", d)
	}
	if d := f.Blocked(netip.MustParseAddr("::ffff:192.0.2.1")); d == 0 {
		t.Errorf("the same address, IPv4-mapped: not blocked")
	}
	now = now.Add(time.Second)
	if d := f.Blocked(a); d != 0 {
		t.Errorf("a second later: blocked %v", d)
	}

	f.Failed(v6a)
	f.Failed(v6a)
	if d := f.Blocked(v6b); d == 0 {
		t.Errorf("same /64: not blocked")
	}
	if d := f.Blocked(v6c); d != 0 {
		t.Errorf("another /64: blocked %v", d)
	}
	if d := f.Blocked(netip.Addr{}); d != 0 {
		t.Errorf("unknown address: blocked %v", d)
	}
	if err := f.Refuse(time.Second); err == nil {
		t.Error("Refuse returned nil")
	}
}

func TestFailuresOff(t *testing.T) {
	f := NewFailures(Config{})
	a := netip.MustParseAddr("198.51.100.7")
	for range 100 {
		f.Failed(a)
	}
	if d := f.Blocked(a); d != 0 {
		t.Errorf("rate 0: blocked %v", d)
	}
	var nilF *Failures
	nilF.Failed(a)
	if d := nilF.Blocked(a); d != 0 {
		t.Errorf("nil: blocked %v", d)
	}
}

func TestFailuresBucketsBounded(t *testing.T) {
	f := NewFailures(Config{Rate: 1, Burst: 1})
	for i := range maxFailureBuckets + 100 {
		// 2001:db8:0:i::1, one /64 each (documentation space, in memory only).
		f.Failed(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i >> 8), byte(i), 15: 1}))
	}
	if n := len(f.buckets.m); n > maxFailureBuckets {
		t.Errorf("%d buckets, want at most %d", n, maxFailureBuckets)
	}
}
