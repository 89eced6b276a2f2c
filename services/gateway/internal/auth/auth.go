package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/netip"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

// ForwardedCertKey is the metadata key on which the gateway's REST edge
// passes the identity URI of a verified client certificate to the
// gateway's in-process gRPC server. Only that server, reachable solely from
// inside the process, trusts it; everywhere else it is ignored and
// stripped.
const ForwardedCertKey = "beacon-gateway-client-cert"

// ForwardedAddrKey is the metadata key on which the REST edge passes the
// caller's IP address to the in-process gRPC server, trusted like
// ForwardedCertKey.
const ForwardedAddrKey = "beacon-gateway-client-addr"

// ForwardedCertErrorPrefix starts a ForwardedCertKey value that carries,
// instead of an identity, why the presented certificate is unusable.
const ForwardedCertErrorPrefix = "error: "

// SecretPrefix starts every Beacon token secret.
const SecretPrefix = "bct_"

// Credentials are what a caller presented on one call.
type Credentials struct {
	// Authorization is the authorization metadata's value; HasAuthorization
	// tells an empty one from none.
	Authorization    string
	HasAuthorization bool
	// CertURI is the beacon:// URI SAN of the verified client certificate,
	// if one was presented; CertErr says why a presented certificate is
	// unusable.
	CertURI string
	CertErr error
	// Addr is the caller's IP address (invalid if unknown).
	Addr netip.Addr
}

// CredentialsFromContext collects the credentials of an incoming gRPC call:
// the authorization metadata and the peer's verified client certificate.
// When forwarded is true the certificate is taken from ForwardedCertKey
// metadata instead (the in-process server behind the REST edge).
func CredentialsFromContext(ctx context.Context, forwarded bool) Credentials {
	var c Credentials
	md, _ := metadata.FromIncomingContext(ctx)
	switch v := md.Get("authorization"); len(v) {
	case 0:
	case 1:
		c.Authorization, c.HasAuthorization = v[0], true
	default:
		c.HasAuthorization = true // several: refused below
		c.Authorization = ""
	}
	if forwarded {
		if v := md.Get(ForwardedAddrKey); len(v) == 1 {
			c.Addr, _ = netip.ParseAddr(v[0])
		}
		if v := md.Get(ForwardedCertKey); len(v) == 1 {
			if msg, bad := strings.CutPrefix(v[0], ForwardedCertErrorPrefix); bad {
				c.CertErr = errors.New(msg)
			} else {
				c.CertURI = v[0]
			}
		}
		return c
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return c
	}
	if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		c.Addr = ap.Addr().Unmap()
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return c
	}
	c.CertURI, c.CertErr = CertificateURI(ti.State.VerifiedChains[0][0])
	return c
}

// Authenticator decides who a caller is.
type Authenticator struct {
	tokens    *TokenCache
	bootstrap []byte // SHA-256 of the bootstrap admin secret; nil if none
}

// NewAuthenticator returns an Authenticator that verifies tokens with
// tokens and, if bootstrapSecret is not empty, also accepts that secret as
// an admin token (compared in constant time).
func NewAuthenticator(tokens *TokenCache, bootstrapSecret string) *Authenticator {
	a := &Authenticator{tokens: tokens}
	if bootstrapSecret != "" {
		h := sha256.Sum256([]byte(bootstrapSecret))
		a.bootstrap = h[:]
	}
	return a
}

// BootstrapActor is the audit actor of the bootstrap admin token.
const BootstrapActor = "bootstrap:admin"

// Decidable reports whether Authenticate can decide on c without asking the
// IPAM: a client certificate, the bootstrap secret, a malformed
// authorization, or a token whose answer is cached.
func (a *Authenticator) Decidable(c Credentials) bool {
	if !c.HasAuthorization {
		return true
	}
	secret, ok := bearerSecret(c.Authorization)
	if !ok || a.tokens == nil || a.isBootstrap(secret) {
		return true
	}
	return a.tokens.Cached(secret)
}

// bearerSecret returns the secret of an "authorization: Bearer SECRET"
// value; ok is false when the value has another form.
func bearerSecret(authorization string) (secret string, ok bool) {
	scheme, secret, ok := strings.Cut(authorization, " ")
	secret = strings.TrimSpace(secret)
	return secret, ok && strings.EqualFold(scheme, "Bearer") && secret != ""
}

// isBootstrap reports whether secret is the bootstrap admin secret.
func (a *Authenticator) isBootstrap(secret string) bool {
	if a.bootstrap == nil {
		return false
	}
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(h[:], a.bootstrap) == 1
}

// Authenticate returns the caller's identity, or why not: one of fault's
// authentication errors (fault.ErrTokenUnverifiable when the IPAM cannot
// verify a token now; the others when the credentials are missing or
// wrong). A bearer token, when present,
// decides; otherwise the client certificate does.
func (a *Authenticator) Authenticate(ctx context.Context, c Credentials) (Identity, error) {
	if c.HasAuthorization {
		secret, ok := bearerSecret(c.Authorization)
		if !ok {
			return Identity{}, fault.ErrMalformedAuthorization
		}
		if a.isBootstrap(secret) {
			return Identity{Role: ipamv1.Role_ROLE_ADMIN, Actor: BootstrapActor}, nil
		}
		if a.tokens == nil {
			return Identity{}, fault.ErrInvalidToken
		}
		return a.tokens.Verify(ctx, secret)
	}
	if c.CertErr != nil {
		return Identity{}, &fault.CertificateError{Reason: c.CertErr.Error()}
	}
	if c.CertURI != "" {
		id, err := ParseURI(c.CertURI)
		if err != nil {
			return Identity{}, &fault.CertificateError{Reason: "client certificate: " + err.Error()}
		}
		return id, nil
	}
	return Identity{}, fault.ErrNoCredentials
}
