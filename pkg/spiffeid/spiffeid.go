// Package spiffeid owns how a Beacon caller's identity is written in its
// certificate: one SPIFFE ID (a URI SAN "spiffe://TRUST-DOMAIN/PATH") whose
// path names the caller's role and what it is bound to:
//
//	spiffe://beacon/gateway                        the gateway
//	spiffe://beacon/admin/NAME                     an operator
//	spiffe://beacon/tenant/TENANT/adapter/CLUSTER  a Kubernetes adapter, one tenant
//	spiffe://beacon/tenant/TENANT/announcer/NODE   an announcer, one node of one tenant
//
// It imports only the standard library.
package spiffeid

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a caller is.
type Role string

// The roles.
const (
	Gateway   Role = "gateway"
	Admin     Role = "admin"
	Adapter   Role = "adapter"
	Announcer Role = "announcer"
)

// ID is a parsed identity.
type ID struct {
	TrustDomain string
	Role        Role
	// Tenant binds adapters and announcers.
	Tenant string
	// Name is the admin's name, the adapter's cluster, the announcer's
	// node; empty for the gateway.
	Name string
}

// ErrInvalid is a certificate or URI that carries no valid identity.
var ErrInvalid = errors.New("spiffeid: not a Beacon identity")

// String returns the SPIFFE ID as a URI.
func (id ID) String() string {
	var path string
	switch id.Role {
	case Gateway:
		path = "gateway"
	case Admin:
		path = "admin/" + id.Name
	case Adapter, Announcer:
		path = "tenant/" + id.Tenant + "/" + string(id.Role) + "/" + id.Name
	}
	return "spiffe://" + id.TrustDomain + "/" + path
}

// URL returns the SPIFFE ID as a URL, for a certificate's URIs.
func (id ID) URL() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: strings.TrimPrefix(id.String(), "spiffe://"+id.TrustDomain)}
}

// Validate checks that id is well formed.
func (id ID) Validate() error {
	if !validSegment(id.TrustDomain) {
		return fmt.Errorf("%w: trust domain %q", ErrInvalid, id.TrustDomain)
	}
	switch id.Role {
	case Gateway:
		if id.Tenant != "" || id.Name != "" {
			return fmt.Errorf("%w: the gateway is bound to no tenant or name", ErrInvalid)
		}
	case Admin:
		if id.Tenant != "" || !validSegment(id.Name) {
			return fmt.Errorf("%w: an admin needs a name and no tenant", ErrInvalid)
		}
	case Adapter, Announcer:
		if !validSegment(id.Tenant) || !validSegment(id.Name) {
			return fmt.Errorf("%w: an %s needs a tenant and a name", ErrInvalid, id.Role)
		}
	default:
		return fmt.Errorf("%w: role %q", ErrInvalid, id.Role)
	}
	return nil
}

// Parse reads an identity from a SPIFFE ID.
func Parse(s string) (ID, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "spiffe" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return ID{}, fmt.Errorf("%w: %q is not a SPIFFE ID", ErrInvalid, s)
	}
	id := ID{TrustDomain: u.Host}
	seg := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	switch {
	case len(seg) == 1 && seg[0] == "gateway":
		id.Role = Gateway
	case len(seg) == 2 && seg[0] == "admin":
		id.Role, id.Name = Admin, seg[1]
	case len(seg) == 4 && seg[0] == "tenant" && (seg[2] == string(Adapter) || seg[2] == string(Announcer)):
		id.Role, id.Tenant, id.Name = Role(seg[2]), seg[1], seg[3]
	default:
		return ID{}, fmt.Errorf("%w: path %q", ErrInvalid, u.Path)
	}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	if id.String() != s {
		return ID{}, fmt.Errorf("%w: %q is not in canonical form", ErrInvalid, s)
	}
	return id, nil
}

// FromCert reads the identity of a verified client certificate: its only
// SPIFFE URI SAN, which must be of trustDomain.
func FromCert(cert *x509.Certificate, trustDomain string) (ID, error) {
	var found []ID
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		id, err := Parse(u.String())
		if err != nil {
			return ID{}, err
		}
		found = append(found, id)
	}
	switch {
	case len(found) == 0:
		return ID{}, fmt.Errorf("%w: the certificate has no SPIFFE ID", ErrInvalid)
	case len(found) > 1:
		return ID{}, fmt.Errorf("%w: the certificate has %d SPIFFE IDs", ErrInvalid, len(found))
	case found[0].TrustDomain != trustDomain:
		return ID{}, fmt.Errorf("%w: trust domain %q, want %q", ErrInvalid, found[0].TrustDomain, trustDomain)
	}
	return found[0], nil
}

// validSegment: lower-case letters, digits, '-', '.' and '_', 1 to 253
// bytes, not "." or "..".
func validSegment(s string) bool {
	if s == "" || len(s) > 253 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		default:
			return false
		}
	}
	return true
}
