// Package bootstrap gives a bare-metal announcer its certificate: when the
// certificate directory holds no valid one, it makes a key and a
// certificate signing request on the node, trades a one-time bootstrap
// token and the request for a certificate at the IPAM
// (CertificateService.CreateNodeCertificate), and writes both (mode 0600).
// The private key never leaves the node. It lives outside internal/ so that
// the end-to-end tests trade tokens with the code announcerd runs.
package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// File names in the certificate directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Paths returns the certificate and key files in dir.
func Paths(dir string) (cert, key string) {
	return filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
}

// Valid reports whether dir holds a certificate and key that match and
// have not expired at now.
func Valid(dir string, now time.Time) bool {
	cf, kf := Paths(dir)
	pair, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil || len(pair.Certificate) == 0 {
		return false
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	return err == nil && now.Before(c.NotAfter) && !now.Before(c.NotBefore)
}

// Ensure makes sure dir holds a valid certificate, trading the token in
// tokenFile at one of conns (tried in turn) if it does not. It returns the
// certificate and key files.
func Ensure(ctx context.Context, dir, tokenFile string, conns []grpc.ClientConnInterface, logger *slog.Logger) (cert, key string, err error) {
	cf, kf := Paths(dir)
	if Valid(dir, time.Now()) {
		return cf, kf, nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", "", fmt.Errorf("bootstrap: no valid certificate in %s, and the token: %w", dir, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", "", fmt.Errorf("bootstrap: no valid certificate in %s, and %s is empty", dir, tokenFile)
	}
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, pk)
	if err != nil {
		return "", "", err
	}
	req := &ipamv1.CreateNodeCertificateRequest{
		BootstrapToken: token,
		CsrPem:         string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})),
	}
	var errs []error
	var resp *ipamv1.CreateNodeCertificateResponse
	for _, conn := range conns {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err = ipamv1.NewCertificateServiceClient(conn).CreateNodeCertificate(cctx, req)
		cancel()
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if resp == nil {
		return "", "", fmt.Errorf("bootstrap: trading the token: %w", errors.Join(errs...))
	}
	der, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	// The key first: a certificate is only ever next to its key.
	if err := writeFile(kf, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return "", "", err
	}
	if err := writeFile(cf, []byte(resp.GetCertificatePem())); err != nil {
		return "", "", err
	}
	logger.InfoContext(ctx, "node certificate obtained with the bootstrap token", "cert", cf, "expire", resp.GetExpireTime().AsTime())
	return cf, kf, nil
}

// writeFile writes data to path (0600) through a temporary file and a
// rename, so that a crash leaves the old file or the new, never half.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
