package frontdoor_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

// TestAuthentication covers the ways in and the ways of being turned
// away, over gRPC and REST.
func TestAuthentication(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	viewerSecret := env.IssueToken(t, "auth-viewer", ipamv1.Role_ROLE_VIEWER, "")

	list := func(c *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := ipamv1.NewPoolServiceClient(c).ListPools(t.Context(), &ipamv1.ListPoolsRequest{}, opts...)
		return err
	}
	t.Run("gRPC", func(t *testing.T) {
		tests := []struct {
			name string
			cred testenv.Cred
			want codes.Code
		}{
			{"nothing", testenv.Cred{}, codes.Unauthenticated},
			{"unknown token", testenv.Token("bct_not-a-token"), codes.Unauthenticated},
			{"not a Beacon secret", testenv.Token("hunter2"), codes.Unauthenticated},
			{"certificate with an unknown role", testenv.Cert("beacon://root"), codes.Unauthenticated},
			{"certificate with a bad tenant", testenv.Cert("beacon://tenant/Not_A_Tenant"), codes.Unauthenticated},
			{"certificate without a beacon identity", testenv.Cert("spiffe://example.org/x"), codes.Unauthenticated},
			{"bootstrap token", env.Admin(), codes.OK},
			{"issued token", testenv.Token(viewerSecret), codes.OK},
			{"viewer certificate", testenv.Cert("beacon://viewer"), codes.OK},
			{"token decides over certificate", testenv.Cred{Identity: "beacon://admin", Token: "bct_not-a-token"}, codes.Unauthenticated},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantCode(t, "ListPools", list(env.Conn(t, tt.cred)), tt.want)
			})
		}
		// A malformed authorization header, sent by hand.
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Basic YWRtaW46YWRtaW4=")
		_, err := ipamv1.NewPoolServiceClient(env.Conn(t, testenv.Cred{})).ListPools(ctx, &ipamv1.ListPoolsRequest{})
		wantCode(t, "Basic authorization", err, codes.Unauthenticated)
	})

	t.Run("certificate from another CA", func(t *testing.T) {
		other, err := devcerts.NewCA("other")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := other.ClientTLS("beacon://admin")
		if err != nil {
			t.Fatal(err)
		}
		tc := env.ClientTLS(t, testenv.Cred{})
		tc.Certificates = []tls.Certificate{cert}
		conn, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := list(conn); err == nil {
			t.Error("a certificate of a foreign CA was accepted")
		}
	})

	t.Run("REST", func(t *testing.T) {
		tests := []struct {
			name string
			cred testenv.Cred
			want int
		}{
			{"nothing", testenv.Cred{}, http.StatusUnauthorized},
			{"unknown token", testenv.Token("bct_not-a-token"), http.StatusUnauthorized},
			{"bootstrap token", env.Admin(), http.StatusOK},
			{"issued token", testenv.Token(viewerSecret), http.StatusOK},
			{"viewer certificate", testenv.Cert("beacon://viewer"), http.StatusOK},
			{"announcer certificate", testenv.Cert("beacon://announcer/c1"), http.StatusForbidden},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := do(t, env.HTTP(t, tt.cred), env.Request(t, tt.cred, "GET", "/v1/pools", ""))
				if res.Code != tt.want {
					t.Fatalf("GET /v1/pools = %d %s, want %d", res.Code, res.Body, tt.want)
				}
				if tt.want == http.StatusUnauthorized {
					if e := decodeError(t, res.Body); e.Code != int(codes.Unauthenticated) || e.Message == "" {
						t.Errorf("401 body = %s", res.Body)
					}
					if res.Header.Get("WWW-Authenticate") != `Bearer realm="beacon"` {
						t.Errorf("WWW-Authenticate = %q", res.Header.Get("WWW-Authenticate"))
					}
				}
			})
		}
		// A viewer may not write.
		res := do(t, env.HTTP(t, testenv.Cert("beacon://viewer")), env.Request(t, testenv.Cred{}, "POST", "/v1/pools?poolId=x", `{"ranges":["198.51.100.0/24"]}`))
		if res.Code != http.StatusForbidden || decodeError(t, res.Body).Code != int(codes.PermissionDenied) {
			t.Errorf("viewer POST /v1/pools = %d %s, want 403", res.Code, res.Body)
		}
	})
}

// TestTokenRevocation issues a token through the gateway, uses it (so the
// gateway caches it, here for an hour), revokes it, and checks that it
// stops working at once: the IPAM tells the gateway of the revocation.
func TestTokenRevocation(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) {
		c.TokenTTL, c.TokenNegativeTTL = time.Hour, 100*time.Millisecond
	}})
	env.WaitReady(t)
	secret := env.IssueToken(t, "revoke-me", ipamv1.Role_ROLE_TENANT, "revoke")
	conn := env.Conn(t, testenv.Token(secret))
	get := func() error {
		_, err := ipamv1.NewAllocationServiceClient(conn).ListAllocations(t.Context(), &ipamv1.ListAllocationsRequest{Parent: "tenants/revoke"})
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	if _, err := ipamv1.NewTokenServiceClient(env.Conn(t, env.Admin())).DeleteToken(t.Context(), &ipamv1.DeleteTokenRequest{Name: "tokens/revoke-me"}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	// Refused within 3s (the property under test; the cache TTL is 1h).
	if err := testwait.Poll(t.Context(), 3*time.Second, func() error {
		if get() == nil {
			return errors.New("the revoked token still works")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v (cache TTL 1h)", err)
	}
	wantCode(t, "revoked token", get(), codes.Unauthenticated)
	t.Logf("revoked token refused %v after revocation", time.Since(revoked).Round(time.Millisecond))
}

// A network that keeps failing to authenticate has its unknown tokens
// refused before the IPAM is asked to verify them, over gRPC and REST; a
// token the gateway already knows and a client certificate still work from
// there.
func TestAuthFailuresLimited(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) {
		c.AuthFailureRate, c.AuthFailureBurst = 0.01, 3
	}})
	known := env.IssueToken(t, "authlimit", ipamv1.Role_ROLE_VIEWER, "")
	list := func(cred testenv.Cred) error {
		_, err := ipamv1.NewPoolServiceClient(env.Conn(t, cred)).ListPools(t.Context(), &ipamv1.ListPoolsRequest{})
		return err
	}
	wantCode(t, "known token, before", list(testenv.Token(known)), codes.OK) // now cached
	for i := range 3 {
		wantCode(t, fmt.Sprintf("bad token %d", i), list(testenv.Token(fmt.Sprintf("bct_bad-%d", i))), codes.Unauthenticated)
	}
	err := list(testenv.Token("bct_bad-next"))
	wantCode(t, "bad token past the burst", err, codes.ResourceExhausted)
	if st := status.Convert(err); !strings.Contains(st.Message(), "failed authentications") {
		t.Errorf("refusal %q does not say why", st.Message())
	}
	wantCode(t, "known token, after", list(testenv.Token(known)), codes.OK)
	wantCode(t, "certificate, after", list(testenv.Cert("beacon://viewer")), codes.OK)

	// REST callers from the same address are the same network.
	r := do(t, env.HTTP(t, testenv.Token("bct_bad-rest")), env.Request(t, testenv.Token("bct_bad-rest"), http.MethodGet, "/v1/pools", ""))
	if r.Code != http.StatusTooManyRequests {
		t.Errorf("REST with an unknown token from a blocked network: status %d, want 429", r.Code)
	}
}
