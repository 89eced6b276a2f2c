package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

// VerifyFunc asks the IPAM whose a secret is (TokenService.VerifyToken).
type VerifyFunc func(ctx context.Context, secret string) (*ipamv1.Token, error)

// TokenCacheConfig says how long answers are kept.
type TokenCacheConfig struct {
	// TTL keeps a valid token's identity (default 10s). A revoked token
	// keeps working through a gateway for at most this long.
	TTL time.Duration
	// NegativeTTL keeps an unknown token's refusal (default 2s), so that a
	// client retrying a bad token does not reach the IPAM on every call. A
	// newly issued token is never refused this long: a secret is unknown
	// before it is issued only if someone guessed it.
	NegativeTTL time.Duration
	// MaxEntries bounds the cache (default 10000).
	MaxEntries int
	// VerifyTimeout bounds one VerifyToken call (default 5s).
	VerifyTimeout time.Duration
	// Observe, if set, is told of each lookup: "hit", "miss" or "error".
	Observe func(result string)
}

// TokenCache verifies bearer secrets with the IPAM and remembers the answer
// for a short while. Keys are SHA-256 digests of the secrets; concurrent
// lookups of one secret share one IPAM call.
type TokenCache struct {
	verify VerifyFunc
	cfg    TokenCacheConfig
	now    func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]tokenEntry
	group   singleflight.Group
}

type tokenEntry struct {
	id    Identity
	err   error
	until time.Time
}

// NewTokenCache returns a cache in front of verify.
func NewTokenCache(verify VerifyFunc, cfg TokenCacheConfig) *TokenCache {
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 2 * time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.VerifyTimeout <= 0 {
		cfg.VerifyTimeout = 5 * time.Second
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string) {}
	}
	return &TokenCache{verify: verify, cfg: cfg, now: time.Now, entries: map[[sha256.Size]byte]tokenEntry{}}
}

// Verify returns the identity a secret grants, or fault.ErrInvalidToken
// for a secret the IPAM does not know (or no longer knows),
// fault.ErrTokenUnverifiable when it could not be asked.
func (c *TokenCache) Verify(ctx context.Context, secret string) (Identity, error) {
	if !wellFormed(secret) {
		return Identity{}, fault.ErrInvalidToken
	}
	key := sha256.Sum256([]byte(secret))
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.now().Before(e.until) {
		c.cfg.Observe("hit")
		return e.id, e.err
	}
	v, err, _ := c.group.Do(string(key[:]), func() (any, error) {
		// Not the caller's cancellation: other callers may share this call.
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.VerifyTimeout)
		defer cancel()
		tok, err := c.verify(vctx, secret)
		now := c.now()
		if err != nil {
			switch status.Code(err) {
			case codes.NotFound, codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
				c.store(key, tokenEntry{err: fault.ErrInvalidToken, until: now.Add(c.cfg.NegativeTTL)})
				c.cfg.Observe("miss")
				return Identity{}, fault.ErrInvalidToken
			default:
				c.cfg.Observe("error")
				return Identity{}, fmt.Errorf("%w: %w", fault.ErrTokenUnverifiable, err)
			}
		}
		c.cfg.Observe("miss")
		id, err := FromToken(tok)
		if err != nil {
			c.store(key, tokenEntry{err: fault.ErrInvalidToken, until: now.Add(c.cfg.NegativeTTL)})
			return Identity{}, fault.ErrInvalidToken
		}
		until := now.Add(c.cfg.TTL)
		if exp := tok.GetExpireTime(); exp != nil && exp.AsTime().Before(until) {
			until = exp.AsTime()
		}
		c.store(key, tokenEntry{id: id, until: until})
		return id, nil
	})
	if err != nil {
		return Identity{}, err
	}
	return v.(Identity), nil
}

// wellFormed reports whether secret has the form of a Beacon token secret
// (anything else is refused without asking the IPAM).
func wellFormed(secret string) bool {
	return strings.HasPrefix(secret, SecretPrefix) && len(secret) <= 128
}

// Forget drops the cached answer for the secret whose SHA-256 is hexHash
// (a revoked token): the next call with it asks the IPAM.
func (c *TokenCache) Forget(hexHash string) {
	var key [sha256.Size]byte
	if n, err := hex.Decode(key[:], []byte(hexHash)); err != nil || n != len(key) {
		return
	}
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

// ForgetAll drops every cached answer (after revocations may have been
// missed).
func (c *TokenCache) ForgetAll() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

// Cached reports whether Verify would answer secret from the cache (or
// refuse it on its form) without asking the IPAM.
func (c *TokenCache) Cached(secret string) bool {
	if !wellFormed(secret) {
		return true
	}
	key := sha256.Sum256([]byte(secret))
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	return ok && c.now().Before(e.until)
}

func (c *TokenCache) store(key [sha256.Size]byte, e tokenEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.cfg.MaxEntries {
		now := c.now()
		for k, old := range c.entries {
			if !now.Before(old.until) || old.err != nil {
				delete(c.entries, k) // expired, or a refusal: cheap to learn again
			}
		}
		if len(c.entries) >= c.cfg.MaxEntries {
			clear(c.entries)
		}
	}
	c.entries[key] = e
}

// Len returns the number of cached answers.
func (c *TokenCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
