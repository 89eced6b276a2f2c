package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri     string
		want    Identity
		wantErr bool
	}{
		{uri: "beacon://admin", want: Identity{Role: ipamv1.Role_ROLE_ADMIN, Actor: "cert:admin"}},
		{uri: "beacon://viewer", want: Identity{Role: ipamv1.Role_ROLE_VIEWER, Actor: "cert:viewer"}},
		{uri: "beacon://tenant/c1", want: Identity{Role: ipamv1.Role_ROLE_TENANT, Tenant: "c1", Actor: "cert:tenant/c1"}},
		{uri: "beacon://announcer/0prod-eu", want: Identity{Role: ipamv1.Role_ROLE_ANNOUNCER, Tenant: "0prod-eu", Actor: "cert:announcer/0prod-eu"}},
		{uri: "beacon://tenant", wantErr: true},
		{uri: "beacon://tenant/", wantErr: true},
		{uri: "beacon://tenant/C1", wantErr: true},
		{uri: "beacon://tenant/c1/extra", wantErr: true},
		{uri: "beacon://tenant/-", wantErr: true},
		{uri: "beacon://admin/c1", wantErr: true},
		{uri: "beacon://root", wantErr: true},
		{uri: "beacon://admin:80", wantErr: true},
		{uri: "beacon://admin?x=1", wantErr: true},
		{uri: "spiffe://admin", wantErr: true},
		{uri: "admin", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			got, err := ParseURI(tt.uri)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseURI(%q) error = %v, wantErr %v", tt.uri, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromToken(t *testing.T) {
	tests := []struct {
		tok     *ipamv1.Token
		want    Identity
		wantErr bool
	}{
		{tok: &ipamv1.Token{Name: "tokens/ops", Role: ipamv1.Role_ROLE_ADMIN}, want: Identity{Role: ipamv1.Role_ROLE_ADMIN, Actor: "token:ops"}},
		{tok: &ipamv1.Token{Name: "tokens/c1-adapter", Role: ipamv1.Role_ROLE_TENANT, Tenant: "tenants/c1"},
			want: Identity{Role: ipamv1.Role_ROLE_TENANT, Tenant: "c1", Actor: "token:c1-adapter"}},
		{tok: &ipamv1.Token{Name: "tokens/x", Role: ipamv1.Role_ROLE_TENANT}, wantErr: true},
		{tok: &ipamv1.Token{Name: "tokens/x", Role: ipamv1.Role_ROLE_ANNOUNCER, Tenant: "c1"}, wantErr: true},
		{tok: &ipamv1.Token{Name: "tokens/x", Role: ipamv1.Role_ROLE_VIEWER, Tenant: "tenants/c1"}, wantErr: true},
		{tok: &ipamv1.Token{Name: "tokens/x"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := FromToken(tt.tok)
		if (err != nil) != tt.wantErr {
			t.Fatalf("FromToken(%v) error = %v, wantErr %v", tt.tok, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("FromToken(%v) (-want +got):\n%s", tt.tok, diff)
		}
	}
}

// fakeIPAM answers VerifyToken from a map and counts the calls.
type fakeIPAM struct {
	mu     sync.Mutex
	tokens map[string]*ipamv1.Token
	calls  atomic.Int32
	err    error
	gate   chan struct{}
}

func (f *fakeIPAM) verify(_ context.Context, secret string) (*ipamv1.Token, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if tk, ok := f.tokens[secret]; ok {
		return tk, nil
	}
	return nil, status.Error(codes.NotFound, "unknown token")
}

func TestTokenCacheTTLs(t *testing.T) {
	ipam := &fakeIPAM{tokens: map[string]*ipamv1.Token{
		"bct_good": {Name: "tokens/good", Role: ipamv1.Role_ROLE_TENANT, Tenant: "tenants/c1"},
	}}
	now := time.Unix(1000, 0)
	c := NewTokenCache(ipam.verify, TokenCacheConfig{TTL: 10 * time.Second, NegativeTTL: 2 * time.Second})
	c.now = func() time.Time { return now }
	ctx := t.Context()

	id, err := c.Verify(ctx, "bct_good")
	if err != nil || id.Actor != "token:good" {
		t.Fatalf("Verify = %v, %v", id, err)
	}
	_, _ = c.Verify(ctx, "bct_good")
	if n := ipam.calls.Load(); n != 1 {
		t.Errorf("IPAM asked %d times for one token within the TTL", n)
	}

	// Revoked: still trusted until the TTL runs out, then refused.
	ipam.mu.Lock()
	delete(ipam.tokens, "bct_good")
	ipam.mu.Unlock()
	now = now.Add(9 * time.Second)
	if _, err := c.Verify(ctx, "bct_good"); err != nil {
		t.Errorf("within the TTL after revocation: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := c.Verify(ctx, "bct_good"); codeOf(err) != codes.Unauthenticated {
		t.Errorf("after the TTL: %v, want Unauthenticated", err)
	}

	// Unknown: refused, and remembered for the negative TTL only.
	calls := ipam.calls.Load()
	for range 5 {
		if _, err := c.Verify(ctx, "bct_bad"); codeOf(err) != codes.Unauthenticated {
			t.Fatalf("unknown token: %v", err)
		}
	}
	if n := ipam.calls.Load() - calls; n != 1 {
		t.Errorf("IPAM asked %d times for one unknown token within the negative TTL", n)
	}
	ipam.mu.Lock()
	ipam.tokens["bct_bad"] = &ipamv1.Token{Name: "tokens/late", Role: ipamv1.Role_ROLE_VIEWER}
	ipam.mu.Unlock()
	now = now.Add(2 * time.Second)
	if _, err := c.Verify(ctx, "bct_bad"); err != nil {
		t.Errorf("after the negative TTL a now-valid token: %v", err)
	}

	// Not a Beacon secret: refused without asking.
	calls = ipam.calls.Load()
	if _, err := c.Verify(ctx, "hunter2"); codeOf(err) != codes.Unauthenticated || ipam.calls.Load() != calls {
		t.Errorf("non-bct secret: %v (IPAM asked: %v)", err, ipam.calls.Load() != calls)
	}
}

func TestTokenCacheExpiryAndErrors(t *testing.T) {
	now := time.Unix(1000, 0)
	ipam := &fakeIPAM{tokens: map[string]*ipamv1.Token{
		"bct_short": {Name: "tokens/short", Role: ipamv1.Role_ROLE_VIEWER, ExpireTime: timestamppb.New(now.Add(3 * time.Second))},
	}}
	c := NewTokenCache(ipam.verify, TokenCacheConfig{})
	c.now = func() time.Time { return now }
	if _, err := c.Verify(t.Context(), "bct_short"); err != nil {
		t.Fatal(err)
	}
	ipam.mu.Lock()
	ipam.tokens = nil
	ipam.mu.Unlock()
	now = now.Add(4 * time.Second) // past the token's expiry, within the TTL
	if _, err := c.Verify(t.Context(), "bct_short"); codeOf(err) != codes.Unauthenticated {
		t.Errorf("expired token served from cache: %v", err)
	}

	// An IPAM that cannot answer: Unavailable, not cached.
	ipam.mu.Lock()
	ipam.err = status.Error(codes.Unavailable, "connection refused")
	ipam.mu.Unlock()
	calls := ipam.calls.Load()
	for range 2 {
		if _, err := c.Verify(t.Context(), "bct_other"); codeOf(err) != codes.Unavailable {
			t.Errorf("IPAM down: %v, want Unavailable", err)
		}
	}
	if ipam.calls.Load()-calls != 2 {
		t.Error("a failure to verify was cached")
	}
}

func TestTokenCacheSharesConcurrentLookups(t *testing.T) {
	ipam := &fakeIPAM{
		tokens: map[string]*ipamv1.Token{"bct_x": {Name: "tokens/x", Role: ipamv1.Role_ROLE_ADMIN}},
		gate:   make(chan struct{}),
	}
	c := NewTokenCache(ipam.verify, TokenCacheConfig{})
	var wg sync.WaitGroup
	var started atomic.Int32
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			started.Add(1)
			_, err := c.Verify(context.Background(), "bct_x")
			errs <- err
		})
	}
	// Every lookup has started and the first is held at the IPAM.
	testwait.Until(t, 30*time.Second, "20 lookups, one at the IPAM", func() bool {
		return started.Load() == 20 && ipam.calls.Load() >= 1
	})
	close(ipam.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := ipam.calls.Load(); n != 1 {
		t.Errorf("20 concurrent lookups made %d IPAM calls, want 1", n)
	}
}

func TestTokenCacheBounded(t *testing.T) {
	ipam := &fakeIPAM{}
	c := NewTokenCache(ipam.verify, TokenCacheConfig{MaxEntries: 10})
	for i := range 100 {
		_, _ = c.Verify(t.Context(), "bct_"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	if n := c.Len(); n > 10 {
		t.Errorf("cache holds %d entries, bound 10", n)
	}
}

func TestAuthenticate(t *testing.T) {
	ipam := &fakeIPAM{tokens: map[string]*ipamv1.Token{
		"bct_viewer": {Name: "tokens/v", Role: ipamv1.Role_ROLE_VIEWER},
	}}
	a := NewAuthenticator(NewTokenCache(ipam.verify, TokenCacheConfig{}), "bct_bootstrap-0123456789")
	tests := []struct {
		name  string
		creds Credentials
		want  Identity
		code  codes.Code
	}{
		{name: "nothing", code: codes.Unauthenticated},
		{name: "bootstrap", creds: Credentials{Authorization: "Bearer bct_bootstrap-0123456789", HasAuthorization: true},
			want: Identity{Role: ipamv1.Role_ROLE_ADMIN, Actor: BootstrapActor}},
		{name: "bootstrap, scheme in lower case", creds: Credentials{Authorization: "bearer bct_bootstrap-0123456789", HasAuthorization: true},
			want: Identity{Role: ipamv1.Role_ROLE_ADMIN, Actor: BootstrapActor}},
		{name: "bootstrap prefix only", creds: Credentials{Authorization: "Bearer bct_bootstrap", HasAuthorization: true}, code: codes.Unauthenticated},
		{name: "issued token", creds: Credentials{Authorization: "Bearer bct_viewer", HasAuthorization: true},
			want: Identity{Role: ipamv1.Role_ROLE_VIEWER, Actor: "token:v"}},
		{name: "basic auth", creds: Credentials{Authorization: "Basic dXNlcjpwYXNz", HasAuthorization: true}, code: codes.Unauthenticated},
		{name: "empty bearer", creds: Credentials{Authorization: "Bearer ", HasAuthorization: true}, code: codes.Unauthenticated},
		{name: "several authorization values", creds: Credentials{HasAuthorization: true}, code: codes.Unauthenticated},
		{name: "certificate", creds: Credentials{CertURI: "beacon://tenant/c1"},
			want: Identity{Role: ipamv1.Role_ROLE_TENANT, Tenant: "c1", Actor: "cert:tenant/c1"}},
		{name: "certificate without identity", creds: Credentials{CertErr: errors.New("client certificate has no beacon:// URI SAN")}, code: codes.Unauthenticated},
		{name: "certificate with a bad identity", creds: Credentials{CertURI: "beacon://root"}, code: codes.Unauthenticated},
		{name: "token decides over certificate", creds: Credentials{CertURI: "beacon://admin", Authorization: "Bearer bct_viewer", HasAuthorization: true},
			want: Identity{Role: ipamv1.Role_ROLE_VIEWER, Actor: "token:v"}},
		{name: "bad token with a good certificate", creds: Credentials{CertURI: "beacon://admin", Authorization: "Bearer bct_nope", HasAuthorization: true}, code: codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(t.Context(), tt.creds)
			if codeOf(err) != tt.code {
				t.Fatalf("Authenticate = %v, want code %v", err, tt.code)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Forget drops one secret's answer by the hash the IPAM announces on
// revocation; ForgetAll drops them all; Cached tells whether Verify would
// ask the IPAM.
func TestTokenCacheForget(t *testing.T) {
	ipam := &fakeIPAM{tokens: map[string]*ipamv1.Token{
		"bct_one": {Name: "tokens/one", Role: ipamv1.Role_ROLE_VIEWER},
		"bct_two": {Name: "tokens/two", Role: ipamv1.Role_ROLE_VIEWER},
	}}
	c := NewTokenCache(ipam.verify, TokenCacheConfig{TTL: time.Hour})
	ctx := t.Context()
	for _, s := range []string{"bct_one", "bct_two"} {
		if _, err := c.Verify(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Cached("bct_one") || !c.Cached("not-a-secret") || c.Cached("bct_three") {
		t.Errorf("Cached: one %v, malformed %v, unknown %v; want true, true, false",
			c.Cached("bct_one"), c.Cached("not-a-secret"), c.Cached("bct_three"))
	}
	sum := sha256.Sum256([]byte("bct_one"))
	c.Forget(hex.EncodeToString(sum[:]))
	c.Forget("not hex")
	if c.Cached("bct_one") || !c.Cached("bct_two") {
		t.Errorf("after Forget(one): one cached %v, two cached %v", c.Cached("bct_one"), c.Cached("bct_two"))
	}
	c.ForgetAll()
	if c.Len() != 0 {
		t.Errorf("after ForgetAll: %d entries", c.Len())
	}
}

// codeOf is the code a caller sees for an error of this package: it goes
// through fault.Status, the gateway's one mapping.
func codeOf(err error) codes.Code {
	return status.Code(fault.Status(context.Background(), slog.New(slog.DiscardHandler), "/test", err))
}
