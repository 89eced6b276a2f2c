// Package devcerts makes throwaway certificates for running Beacon on one
// machine and for tests: an ECDSA P-256 certificate authority, a server
// certificate for localhost (127.0.0.1, ::1), and client certificates that
// carry a Beacon identity as a URI SAN, such as "beacon://admin" or
// "beacon://tenant/c1" (see docs/gateway.md).
//
// Nothing here is meant for production: the CA key sits next to the
// certificates it signs. Ensure writes a directory that must never be
// checked in; private keys are written with mode 0600.
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Validity is how long the certificates made here are valid.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA makes a self-signed CA whose subject is name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Beacon development"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA certificate: %w", err)
	}
	return caFromDER(der, key)
}

// LoadCA reads a CA back from its PEM certificate and PEM (PKCS #8) key.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("devcerts: CA certificate is not PEM")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, errors.New("devcerts: CA key is not a PEM PKCS #8 key")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("devcerts: CA key is not ECDSA")
	}
	return caFromDER(cb.Bytes, key)
}

func caFromDER(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM returns the CA certificate in PEM form.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// KeyPEM returns the CA's private key in PEM (PKCS #8) form.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// Pool returns a pool holding only the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Server makes a server certificate for hosts (DNS names or IP addresses);
// no hosts means localhost, 127.0.0.1 and ::1. It returns PEM certificate
// and key.
func (ca *CA) Server(hosts ...string) (certPEM, keyPEM []byte, err error) {
	return ca.ServerFor(Validity, hosts...)
}

// ServerFor is Server with a validity of its own.
func (ca *CA) ServerFor(validity time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	return ca.forHosts(validity, hosts, x509.ExtKeyUsageServerAuth)
}

// PeerFor makes a certificate good for both ends of a connection (server
// and client authentication) for hosts, as etcd members present to each
// other on the peer port. Hosts are as for ServerFor and must not be empty.
func (ca *CA) PeerFor(validity time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("devcerts: a peer certificate needs at least one host")
	}
	return ca.forHosts(validity, hosts, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) forHosts(validity time.Duration, hosts []string, usage ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl, validity)
}

// Client makes a client certificate whose only URI SAN is identity, e.g.
// "beacon://tenant/c1". It returns PEM certificate and key.
func (ca *CA) Client(identity string) (certPEM, keyPEM []byte, err error) {
	return ca.ClientFor(identity, Validity)
}

// ClientFor is Client with a validity of its own.
func (ca *CA) ClientFor(identity string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	u, err := url.Parse(identity)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("devcerts: identity %q is not a URI", identity)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: strings.TrimPrefix(identity, u.Scheme+"://")},
		URIs:        []*url.URL{u},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, validity)
}

// ServerTLS is Server as a tls.Certificate.
func (ca *CA) ServerTLS(hosts ...string) (tls.Certificate, error) {
	c, k, err := ca.Server(hosts...)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

// ClientTLS is Client as a tls.Certificate.
func (ca *CA) ClientTLS(identity string) (tls.Certificate, error) {
	c, k, err := ca.Client(identity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) (certOut, keyOut []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("devcerts: key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("devcerts: certificate: %w", err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("devcerts: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("devcerts: serial number: %w", err)
	}
	return n, nil
}

// File names inside a directory written by Ensure.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

// ClientFiles returns the file names Ensure uses for identity's certificate
// and key: "beacon://tenant/c1" becomes client-tenant-c1.pem and
// client-tenant-c1-key.pem.
func ClientFiles(identity string) (cert, key string) {
	base := identity
	if _, rest, ok := strings.Cut(identity, "://"); ok {
		base = rest
	}
	base = "client-" + strings.NewReplacer("/", "-", ":", "-", "\\", "-", "..", "-").Replace(base)
	return base + ".pem", base + "-key.pem"
}

// Paths are the files of a directory written by Ensure.
type Paths struct {
	Dir        string
	CA         string // CA certificate
	CAKey      string // CA private key
	ServerCert string
	ServerKey  string
	// Clients maps each identity asked for to its certificate and key.
	Clients map[string]ClientPaths
}

// ClientPaths are one client certificate and its key.
type ClientPaths struct {
	Cert, Key string
}

// DefaultIdentities returns the client certificates gatewayd --dev-certs
// makes (a new slice each call).
func DefaultIdentities() []string {
	return []string{"beacon://admin", "beacon://viewer", "beacon://tenant/demo", "beacon://announcer/demo"}
}

// Ensure makes sure dir holds a CA, a localhost server certificate and a
// client certificate per identity, creating what is missing (dir itself
// with mode 0700, keys with 0600). An existing CA is reused, so that
// certificates already handed out stay valid; if the CA is made anew, the
// server and client certificates are remade with it.
func Ensure(dir string, identities ...string) (Paths, error) {
	p := Paths{
		Dir: dir, CA: filepath.Join(dir, CAFile), CAKey: filepath.Join(dir, CAKeyFile),
		ServerCert: filepath.Join(dir, ServerFile), ServerKey: filepath.Join(dir, ServerKeyFile),
		Clients: map[string]ClientPaths{},
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, fmt.Errorf("devcerts: %w", err)
	}
	ca, fresh, err := loadOrMakeCA(p)
	if err != nil {
		return p, err
	}
	if fresh || !exists(p.ServerCert) || !exists(p.ServerKey) {
		c, k, err := ca.Server()
		if err != nil {
			return p, err
		}
		if err := writePair(p.ServerCert, c, p.ServerKey, k); err != nil {
			return p, err
		}
	}
	for _, id := range identities {
		cf, kf := ClientFiles(id)
		cp := ClientPaths{Cert: filepath.Join(dir, cf), Key: filepath.Join(dir, kf)}
		p.Clients[id] = cp
		if !fresh && exists(cp.Cert) && exists(cp.Key) {
			continue
		}
		c, k, err := ca.Client(id)
		if err != nil {
			return p, err
		}
		if err := writePair(cp.Cert, c, cp.Key, k); err != nil {
			return p, err
		}
	}
	return p, nil
}

func loadOrMakeCA(p Paths) (*CA, bool, error) {
	certPEM, errC := os.ReadFile(p.CA)
	keyPEM, errK := os.ReadFile(p.CAKey)
	if errC == nil && errK == nil {
		ca, err := LoadCA(certPEM, keyPEM)
		return ca, false, err
	}
	for _, err := range []error{errC, errK} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, false, fmt.Errorf("devcerts: %w", err)
		}
	}
	ca, err := NewCA("Beacon development CA")
	if err != nil {
		return nil, false, err
	}
	kp, err := ca.KeyPEM()
	if err != nil {
		return nil, false, err
	}
	if err := writePair(p.CA, ca.CertPEM(), p.CAKey, kp); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

func writePair(certPath string, cert []byte, keyPath string, key []byte) error {
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return fmt.Errorf("devcerts: %w", err)
	}
	if err := os.WriteFile(certPath, cert, 0o644); err != nil { //nolint:gosec // certificates are public
		return fmt.Errorf("devcerts: %w", err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
