// Package auth turns what a caller presents to the gateway (a client
// certificate or a bearer token) into an Identity: a role, the tenant it
// acts for, and the actor name the IPAM records in its audit log.
//
// Client certificates carry the identity in one URI SAN:
//
//	beacon://admin               admin
//	beacon://viewer              viewer
//	beacon://tenant/{tenant}     tenant of {tenant}
//	beacon://announcer/{tenant}  announcer of {tenant}
//
// Bearer tokens ("authorization: Bearer bct_...") are verified by the
// IPAM's TokenService.VerifyToken, with a short cache (TokenCache).
package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Identity is an authenticated caller.
type Identity struct {
	// Role is what the caller may do.
	Role ipamv1.Role
	// Tenant is the tenant ID (without "tenants/") a tenant or announcer
	// acts for; empty for admins and viewers.
	Tenant string
	// Actor names the caller in the IPAM's audit log: "cert:tenant/c1",
	// "token:c1-adapter", "bootstrap:admin".
	Actor string
}

// RoleName is the short lower-case name of a role: admin, tenant,
// announcer, viewer.
func RoleName(r ipamv1.Role) string {
	switch r {
	case ipamv1.Role_ROLE_ADMIN:
		return "admin"
	case ipamv1.Role_ROLE_TENANT:
		return "tenant"
	case ipamv1.Role_ROLE_ANNOUNCER:
		return "announcer"
	case ipamv1.Role_ROLE_VIEWER:
		return "viewer"
	default:
		return "unspecified"
	}
}

// String is for logs.
func (id Identity) String() string { return id.Actor }

// URIScheme is the scheme of identity URI SANs.
const URIScheme = "beacon"

// ParseURI reads an identity URI such as "beacon://tenant/c1".
func ParseURI(s string) (Identity, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != URIScheme || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("identity %q is not beacon://ROLE[/TENANT]", s)
	}
	tenant := strings.TrimPrefix(u.Path, "/")
	id := Identity{Actor: "cert:" + u.Host}
	switch u.Host {
	case "admin":
		id.Role = ipamv1.Role_ROLE_ADMIN
	case "viewer":
		id.Role = ipamv1.Role_ROLE_VIEWER
	case "tenant":
		id.Role = ipamv1.Role_ROLE_TENANT
	case "announcer":
		id.Role = ipamv1.Role_ROLE_ANNOUNCER
	default:
		return Identity{}, fmt.Errorf("identity %q: unknown role %q", s, u.Host)
	}
	switch id.Role {
	case ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER:
		if !ValidTenant(tenant) {
			return Identity{}, fmt.Errorf("identity %q: %q is not a tenant ID", s, tenant)
		}
		id.Tenant = tenant
		id.Actor += "/" + tenant
	default:
		if tenant != "" {
			return Identity{}, fmt.Errorf("identity %q: role %s takes no tenant", s, u.Host)
		}
	}
	return id, nil
}

// CertificateURI returns the one beacon:// URI SAN of a certificate.
func CertificateURI(c *x509.Certificate) (string, error) {
	var found []string
	for _, u := range c.URIs {
		if u.Scheme == URIScheme {
			found = append(found, u.String())
		}
	}
	switch len(found) {
	case 0:
		return "", errors.New("client certificate has no beacon:// URI SAN")
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("client certificate has %d beacon:// URI SANs; it must have one", len(found))
	}
}

// FromCertificate returns the identity of a verified client certificate.
func FromCertificate(c *x509.Certificate) (Identity, error) {
	u, err := CertificateURI(c)
	if err != nil {
		return Identity{}, err
	}
	return ParseURI(u)
}

// FromToken returns the identity a verified token grants.
func FromToken(t *ipamv1.Token) (Identity, error) {
	id := Identity{Role: t.GetRole(), Actor: "token:" + strings.TrimPrefix(t.GetName(), "tokens/")}
	switch t.GetRole() {
	case ipamv1.Role_ROLE_ADMIN, ipamv1.Role_ROLE_VIEWER:
		if t.GetTenant() != "" {
			return Identity{}, fmt.Errorf("token %s: role %s with a tenant", t.GetName(), RoleName(t.GetRole()))
		}
	case ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER:
		tenant, ok := strings.CutPrefix(t.GetTenant(), "tenants/")
		if !ok || !ValidTenant(tenant) {
			return Identity{}, fmt.Errorf("token %s: role %s without a valid tenant", t.GetName(), RoleName(t.GetRole()))
		}
		id.Tenant = tenant
	default:
		return Identity{}, fmt.Errorf("token %s has no valid role", t.GetName())
	}
	return id, nil
}

// ValidTenant reports whether s is a tenant ID as the IPAM defines it: 1-63
// lower-case letters, digits and '-', not starting or ending with '-'.
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
