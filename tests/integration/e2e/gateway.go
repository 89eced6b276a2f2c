package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// GatewayAddr is where a lab's gatewayd listens, on its host's loopback.
const GatewayAddr = "127.0.0.1:7443"

// Gateway is gatewayd running in a lab host's namespace in front of the
// IPAM replicas, with development certificates and a bootstrap admin
// token: what users and the console call.
type Gateway struct {
	proc   *netlab.Proc
	host   *netlab.Host
	caFile string
	token  string
	client *http.Client
}

// StartGateway starts bin/gatewayd in h's namespace in front of ipam
// (comma-separated replica addresses), its certificates and token in dir,
// and waits (up to 60 s) until it answers.
func StartGateway(ctx context.Context, h *netlab.Host, bin, ipam, dir string) (*Gateway, error) {
	certs, tokenFile := filepath.Join(dir, "certs"), filepath.Join(dir, "bootstrap-token")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p, err := h.Start("gatewayd", []string{filepath.Join(bin, "gatewayd"),
		"--listen", GatewayAddr, "--ops-listen", "127.0.0.1:7444", "--ipam", ipam,
		"--dev-certs", certs, "--bootstrap-token-file", tokenFile, "--log-level", "debug",
	}, nil)
	if err != nil {
		return nil, err
	}
	g := &Gateway{proc: p, host: h, caFile: filepath.Join(certs, "ca.pem")}
	dial := DialerIn(h.NS)
	err = netlab.Eventually(ctx, 60*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("gatewayd exited (%w): %s", err, p.Tail(20))
		}
		if g.client == nil {
			token, err := os.ReadFile(tokenFile)
			if err != nil {
				return err
			}
			ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
			if err != nil {
				return err
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(ca) {
				return errors.New("no certificate in the development CA file yet")
			}
			g.token = strings.TrimSpace(string(token))
			g.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
				DialContext:     func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
			}}
		}
		_, err := g.Get(ctx, "/v1/tenants/"+Tenant+"/allocations")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2e: gatewayd not answering: %w", err)
	}
	return g, nil
}

// Get calls path on the gateway's REST API as the admin and returns the
// body of a 200 answer.
func (g *Gateway) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+GatewayAddr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("e2e: gateway GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

// Beaconctl runs bin/beaconctl in the gateway's namespace against it, as
// the bootstrap admin, and returns its output.
func (g *Gateway) Beaconctl(ctx context.Context, bin string, args ...string) (string, error) {
	return g.host.Run(ctx, filepath.Join(bin, "beaconctl"),
		append([]string{"--server", GatewayAddr, "--ca", g.caFile, "--token", g.token}, args...)...)
}

// Proc is gatewayd's process.
func (g *Gateway) Proc() *netlab.Proc { return g.proc }
