package auth

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// canonicalURI is the one way an identity is written in a certificate.
func canonicalURI(id Identity) string {
	u := URIScheme + "://" + RoleName(id.Role)
	if id.Tenant != "" {
		u += "/" + id.Tenant
	}
	return u
}

// FuzzIdentityURI feeds arbitrary text to ParseURI, which reads the
// identity of a client certificate's beacon:// URI SAN. A refusal quotes
// the URI; an accepted identity has a known role, a valid tenant exactly
// when the role acts for one, the actor its audit records show, and it is
// the identity of its canonical URI.
func FuzzIdentityURI(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseURI(s)
		if err != nil {
			if id != (Identity{}) || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseURI(%q) = %+v, %v: a refusal must quote the URI and give no identity", s, id, err)
			}
			return
		}
		switch id.Role {
		case ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER:
			if !ValidTenant(id.Tenant) {
				t.Fatalf("ParseURI(%q) = %+v: invalid tenant", s, id)
			}
		case ipamv1.Role_ROLE_ADMIN, ipamv1.Role_ROLE_VIEWER:
			if id.Tenant != "" {
				t.Fatalf("ParseURI(%q) = %+v: a tenant for a role that takes none", s, id)
			}
		default:
			t.Fatalf("ParseURI(%q) = %+v: unknown role", s, id)
		}
		canon := canonicalURI(id)
		if want := "cert:" + strings.TrimPrefix(canon, URIScheme+"://"); id.Actor != want {
			t.Fatalf("ParseURI(%q) actor %q, want %q", s, id.Actor, want)
		}
		if again, err := ParseURI(canon); err != nil || again != id {
			t.Fatalf("ParseURI(%q) = %+v, but its canonical %q gives %+v, %v", s, id, canon, again, err)
		}
	})
}

// FuzzAuthorization feeds an arbitrary authorization value and certificate
// URI to Authenticate (with a bootstrap secret and no token cache): the
// caller is the bootstrap admin exactly when the value is "Bearer" (any
// case), one space and the secret (with blanks around it); an
// authorization value, when present, decides even with a certificate; every
// refusal is Unauthenticated.
func FuzzAuthorization(f *testing.F) {
	const secret = "bct_fuzz-bootstrap"
	a := NewAuthenticator(nil, secret)
	f.Fuzz(func(t *testing.T, authorization string, has bool, certURI string) {
		got, ok := bearerSecret(authorization)
		if ok {
			if got == "" || strings.TrimSpace(got) != got || !strings.EqualFold(authorization[:len("Bearer ")], "Bearer ") {
				t.Fatalf("bearerSecret(%q) = %q", authorization, got)
			}
			if again, ok := bearerSecret("Bearer " + got); !ok || again != got {
				t.Fatalf("bearerSecret(%q) = %q, but Bearer %s gives %q, %v", authorization, got, got, again, ok)
			}
		}
		c := Credentials{Authorization: authorization, HasAuthorization: has, CertURI: certURI}
		if !a.Decidable(c) {
			t.Fatalf("without a token cache every credential must be decidable: %+v", c)
		}
		id, err := a.Authenticate(context.Background(), c)
		if err != nil {
			if codeOf(err) != codes.Unauthenticated || id != (Identity{}) {
				t.Fatalf("Authenticate(%+v) = %+v, %v; want Unauthenticated and no identity", c, id, err)
			}
		}
		switch {
		case has && ok && got == secret:
			if err != nil || id.Role != ipamv1.Role_ROLE_ADMIN || id.Actor != BootstrapActor {
				t.Fatalf("Authenticate(%+v) = %+v, %v; want the bootstrap admin", c, id, err)
			}
		case has:
			if err == nil {
				t.Fatalf("Authenticate(%+v) = %+v: accepted a wrong or malformed authorization", c, id)
			}
		default:
			want, werr := ParseURI(certURI)
			if certURI == "" {
				werr = status.Error(codes.Unauthenticated, "none")
			}
			if (err == nil) != (werr == nil) || err == nil && id != want {
				t.Fatalf("Authenticate(%+v) = %+v, %v; the certificate says %+v, %v", c, id, err, want, werr)
			}
		}
	})
}
