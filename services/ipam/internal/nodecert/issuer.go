// Package nodecert serves the IPAM's CertificateService: one-time bootstrap
// tokens, bound to one node of one tenant, that a bare-metal announcer
// trades with a certificate signing request for a client certificate
// naming that node, signed by the node-issuer CA (the CA ipamd's
// --tls-client-ca trusts).
package nodecert

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"time"

	"github.com/beaconlb/beacon/pkg/spiffeid"
)

// Issuer signs node certificates with a CA's key.
type Issuer struct {
	cert     *x509.Certificate
	key      crypto.Signer
	validity time.Duration
}

// ErrCSR is a certificate signing request that cannot be used.
var ErrCSR = errors.New("nodecert: invalid certificate signing request")

// LoadIssuer reads the CA certificate and its PKCS #8 (or EC/PKCS #1) key
// from PEM files; validity is how long the certificates it signs last.
func LoadIssuer(certFile, keyFile string, validity time.Duration) (*Issuer, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("node issuer: %w", err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("node issuer: %w", err)
	}
	return NewIssuer(cb, kb, validity)
}

// NewIssuer is LoadIssuer from PEM bytes.
func NewIssuer(certPEM, keyPEM []byte, validity time.Duration) (*Issuer, error) {
	cblk, _ := pem.Decode(certPEM)
	if cblk == nil || cblk.Type != "CERTIFICATE" {
		return nil, errors.New("node issuer: the certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("node issuer: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("node issuer: the certificate is not a CA's")
	}
	kblk, _ := pem.Decode(keyPEM)
	if kblk == nil {
		return nil, errors.New("node issuer: the key is not PEM")
	}
	var key any
	if key, err = x509.ParsePKCS8PrivateKey(kblk.Bytes); err != nil {
		if key, err = x509.ParseECPrivateKey(kblk.Bytes); err != nil {
			if key, err = x509.ParsePKCS1PrivateKey(kblk.Bytes); err != nil {
				return nil, errors.New("node issuer: the key is not a PKCS #8, EC or PKCS #1 private key")
			}
		}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("node issuer: the key cannot sign")
	}
	if validity <= 0 {
		return nil, errors.New("node issuer: validity must be positive")
	}
	return &Issuer{cert: cert, key: signer, validity: validity}, nil
}

// Sign issues a client certificate for id with the public key of csrPEM
// (whose signature must verify); everything else the CSR asks for is
// ignored. It returns the certificate as PEM and when it expires.
func (is *Issuer) Sign(csrPEM []byte, id spiffeid.ID) ([]byte, time.Time, error) {
	blk, _ := pem.Decode(csrPEM)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, time.Time{}, fmt.Errorf("%w: not a PEM CERTIFICATE REQUEST", ErrCSR)
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrCSR, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrCSR, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, time.Time{}, err
	}
	now := time.Now()
	notAfter := now.Add(is.validity).Truncate(time.Second) // as a certificate holds it
	if notAfter.After(is.cert.NotAfter) {
		notAfter = is.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		URIs:         []*url.URL{id.URL()},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	tmpl.Subject.CommonName = id.Name
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, csr.PublicKey, is.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrCSR, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), notAfter, nil
}
