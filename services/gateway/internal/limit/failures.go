package limit

import (
	"fmt"
	"net/netip"
	"time"
)

// Failures limits how often callers from one network may fail to
// authenticate: one token bucket per client prefix (the /32 of an IPv4
// address, the /64 of an IPv6 one: what one client usually holds). Each
// failure takes a token; while a prefix's bucket is empty, its calls that
// the gateway cannot decide without asking the IPAM (an unknown bearer
// token) are refused before they reach it. Callers with a client
// certificate or a token the gateway already knows are never refused here,
// so one misbehaving client cannot lock out the others behind its NAT.
type Failures struct {
	cfg     Config
	now     func() time.Time
	buckets buckets[netip.Prefix]
}

// maxFailureBuckets bounds the buckets kept: client prefixes are the
// attacker's to choose. Past it, idle buckets go first, then any.
const maxFailureBuckets = 10000

// NewFailures returns a Failures; with cfg.Rate 0 it refuses nothing.
func NewFailures(cfg Config) *Failures {
	cfg = cfg.withDefaults()
	return &Failures{cfg: cfg, now: time.Now, buckets: buckets[netip.Prefix]{cfg: cfg, max: maxFailureBuckets, evictAny: true}}
}

// prefixOf returns the bucket key of a client address.
func prefixOf(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 64
	if a.Is4() {
		bits = 32
	}
	p, _ := a.Prefix(bits)
	return p
}

// Blocked returns how long until callers from a may fail again, or 0 if
// they may try now. An invalid address (unknown caller) is never blocked.
func (f *Failures) Blocked(a netip.Addr) time.Duration {
	if f == nil || f.cfg.Rate <= 0 || !a.IsValid() {
		return 0
	}
	now := f.now()
	b := f.buckets.lookup(prefixOf(a))
	if b == nil || b.lim.TokensAt(now) >= 1 {
		return 0
	}
	r := b.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return max(d, time.Millisecond)
}

// Failed records a failed authentication from a.
func (f *Failures) Failed(a netip.Addr) {
	if f == nil || f.cfg.Rate <= 0 || !a.IsValid() {
		return
	}
	now := f.now()
	f.buckets.get(prefixOf(a), now).lim.AllowN(now, 1)
}

// Refuse returns the error of a call refused because its network failed to
// authenticate too often: ResourceExhausted with google.rpc.RetryInfo and
// google.rpc.ErrorInfo (reason AUTH_FAILURES_LIMITED).
func (f *Failures) Refuse(wait time.Duration) error {
	wait = roundWait(wait)
	return exhausted(fmt.Sprintf("too many failed authentications from this network (%g/s, burst %d); retry in %v", f.cfg.Rate, f.cfg.Burst, wait),
		wait, "AUTH_FAILURES_LIMITED", nil)
}
