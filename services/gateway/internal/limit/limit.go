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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
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
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	buckets map[key]*bucket
}

type key struct{ role, tenant string }

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// maxIdleBuckets is how many buckets are kept before idle ones are
// dropped; callers are authenticated, so this bounds nothing an attacker
// controls, only memory after many tenants came and went.
const maxIdleBuckets = 10000

// New returns a Limiter; with cfg.Rate 0 it allows everything.
func New(cfg Config) *Limiter {
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(math.Ceil(cfg.Rate)))
	}
	return &Limiter{cfg: cfg, now: time.Now, buckets: map[key]*bucket{}}
}

// Allow takes one token from the bucket of role and tenant and returns 0;
// when the bucket is empty it takes nothing and returns how long until a
// token is there. Refuse makes the error to return then.
func (l *Limiter) Allow(role, tenant string) time.Duration {
	if l == nil || l.cfg.Rate <= 0 {
		return 0
	}
	now := l.now()
	k := key{role, tenant}
	l.mu.Lock()
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= maxIdleBuckets {
			for k, old := range l.buckets {
				if now.Sub(old.last) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)}
		l.buckets[k] = b
	}
	b.last = now
	l.mu.Unlock()

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
	// Whole milliseconds, at least one, so that a client sleeping for the
	// delay finds a token.
	wait = max(time.Millisecond, wait.Round(time.Millisecond))
	who := role
	if tenant != "" {
		who = role + " of tenants/" + tenant
	}
	st := status.New(codes.ResourceExhausted,
		fmt.Sprintf("rate limit for %s exceeded (%g calls/s, burst %d); retry in %v", who, l.cfg.Rate, l.cfg.Burst, wait))
	meta := map[string]string{"role": role}
	if tenant != "" {
		meta["tenant"] = tenant
	}
	if d, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
		&errdetails.ErrorInfo{Reason: "RATE_LIMITED", Domain: "gateway.beacon", Metadata: meta},
	); err == nil {
		st = d
	}
	return st.Err()
}
