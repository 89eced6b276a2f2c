package nodecert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/spiffeid"
)

// The certificate names the identity the token was bound to, whatever the
// CSR asks for, and carries the CSR's public key.
func TestSignIgnoresWhatTheCSRAsks(t *testing.T) {
	ca, err := devcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	is, err := NewIssuer(ca.CertPEM(), key, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	admin, _ := url.Parse("spiffe://beacon/admin/root")
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "root"}, URIs: []*url.URL{admin}, DNSNames: []string{"ipamd"},
	}, pk)
	if err != nil {
		t.Fatal(err)
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	id := spiffeid.ID{TrustDomain: "beacon", Role: spiffeid.Announcer, Tenant: "c1", Name: "node-7"}
	out, notAfter, err := is.Sign(csr, id)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(out)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := spiffeid.FromCert(cert, "beacon")
	if err != nil || got != id {
		t.Errorf("identity %v (%v), want %v", got, err, id)
	}
	if len(cert.DNSNames) != 0 || len(cert.URIs) != 1 {
		t.Errorf("DNS names %v, URIs %v: the CSR's wishes leaked in", cert.DNSNames, cert.URIs)
	}
	if !cert.PublicKey.(*ecdsa.PublicKey).Equal(&pk.PublicKey) {
		t.Error("not the CSR's public key")
	}
	if !cert.NotAfter.Equal(notAfter) || time.Until(notAfter) > 24*time.Hour {
		t.Errorf("expires %v (reported %v), want within 24h", cert.NotAfter, notAfter)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("does not verify as a client certificate of the CA: %v", err)
	}

	for name, bad := range map[string][]byte{
		"not PEM":       []byte("hello"),
		"a certificate": ca.CertPEM(),
		"bad signature": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: append(der[:len(der)-4:len(der)-4], 0, 0, 0, 0)}),
	} {
		if _, _, err := is.Sign(bad, id); !errors.Is(err, ErrCSR) {
			t.Errorf("%s: %v, want ErrCSR", name, err)
		}
	}
}
