// Package limit is the gateway's per-caller rate limit: one token bucket
// per tenant and role (admins and viewers, who act for no tenant, share one
// bucket per role). Every call, unary or stream, takes one token when it
// starts; messages on a stream are not counted.
package limit

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

// Config is the rate every bucket refills at and how many calls it holds.
type Config struct {
	// Rate is calls per second per tenant and role; 0 turns limiting off.
	Rate float64
	// Burst is the bucket's size (default: Rate rounded up, at least 1).
	Burst int
}

// Limiter holds the buckets.
type Limiter struct {
	cfg     Config
	now     func() time.Time
	buckets buckets[key]
}

type key struct{ role, tenant string }

// maxIdleBuckets is how many buckets are kept before idle ones are
// dropped; callers are authenticated, so this bounds nothing an attacker
// controls, only memory after many tenants came and went.
const maxIdleBuckets = 10000

// New returns a Limiter; with cfg.Rate 0 it allows everything.
func New(cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	return &Limiter{cfg: cfg, now: time.Now, buckets: buckets[key]{cfg: cfg, max: maxIdleBuckets}}
}

// Allow takes one token from the bucket of role and tenant and returns 0;
// when the bucket is empty it takes nothing and returns how long until a
// token is there. Refuse makes the error to return then.
func (l *Limiter) Allow(role, tenant string) time.Duration {
	if l == nil || l.cfg.Rate <= 0 {
		return 0
	}
	now := l.now()
	b := l.buckets.get(key{role, tenant}, now)
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

// Refuse returns the error of a call refused by the bucket of role and
// tenant, to be tried again after wait: ResourceExhausted carrying
// google.rpc.RetryInfo (wait) and google.rpc.ErrorInfo (reason
// RATE_LIMITED).
func (l *Limiter) Refuse(role, tenant string, wait time.Duration) error {
	wait = roundWait(wait)
	who := role
	if tenant != "" {
		who = role + " of tenants/" + tenant
	}
	meta := map[string]string{"role": role}
	if tenant != "" {
		meta["tenant"] = tenant
	}
	return exhausted(fmt.Sprintf("rate limit for %s exceeded (%g calls/s, burst %d); retry in %v", who, l.cfg.Rate, l.cfg.Burst, wait),
		wait, "RATE_LIMITED", meta)
}

// withDefaults fills in Burst: Rate rounded up, at least 1.
func (c Config) withDefaults() Config {
	if c.Burst <= 0 {
		c.Burst = max(1, int(math.Ceil(c.Rate)))
	}
	return c
}

// bucket is one token bucket and when it was last used.
type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// buckets is a bounded set of token buckets by key. Past max, buckets idle
// for a minute are dropped when a new one is made; with evictAny (keys an
// attacker chooses), any bucket is dropped while there are max or more, and
// idle ones down to half of max.
type buckets[K comparable] struct {
	cfg      Config
	max      int
	evictAny bool

	mu sync.Mutex
	m  map[K]*bucket
}

// lookup returns the bucket of k, or nil.
func (s *buckets[K]) lookup(k K) *bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// get returns the bucket of k, made if missing, marked used at now.
func (s *buckets[K]) get(k K, now time.Time) *bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.m[k]
	if b == nil {
		if s.m == nil {
			s.m = make(map[K]*bucket)
		}
		if len(s.m) >= s.max {
			for k, old := range s.m {
				if now.Sub(old.last) > time.Minute || s.evictAny && len(s.m) >= s.max {
					delete(s.m, k)
				}
				if s.evictAny && len(s.m) < s.max/2 {
					break
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(s.cfg.Rate), s.cfg.Burst)}
		s.m[k] = b
	}
	b.last = now
	return b
}

// roundWait rounds a wait to whole milliseconds, at least one, so that a
// client sleeping for it finds a token.
func roundWait(wait time.Duration) time.Duration {
	return max(time.Millisecond, wait.Round(time.Millisecond))
}

// exhausted is a refusal to retry after wait (fault.Status makes it
// ResourceExhausted with RetryInfo and ErrorInfo).
func exhausted(msg string, wait time.Duration, reason string, meta map[string]string) error {
	return &fault.LimitError{Message: msg, Wait: wait, Reason: reason, Meta: meta}
}
