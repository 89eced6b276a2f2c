package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/beaconlb/beacon/pkg/daemon"
)

// config is announcerd's configuration, from flags with environment
// fallbacks (BEACON_ANNOUNCER_ + the flag name in upper case, '-' as '_').
type config struct {
	// Version: print the version and exit (--version).
	Version          bool
	IPAM             []string
	Tenant           string
	Node             string
	Labels           map[string]string
	RouterID         netip.Addr
	OpsListen        string
	Grace            time.Duration
	KeepRoutesOnExit bool
	LogLevel         string
	OTLPEndpoint     string
	TLSCA            string
	TLSCert          string
	TLSKey           string
	Token            string
	// TokenFile holds a bearer token read again on every connection (a
	// projected ServiceAccount token, which the kubelet rotates).
	TokenFile string
	// BootstrapTokenFile holds a one-time token traded for a certificate
	// written to CertDir when CertDir holds no valid one.
	BootstrapTokenFile, CertDir string

	// LocalDevice, when set, is the dummy device on which the node keeps
	// the L2 addresses it answers for as local addresses (bare metal).
	LocalDevice string
	// BGPHostname is the host name GoBGP sends peers: the node name by
	// default, empty for the OS host name.
	BGPHostname string
}

func parseConfig(args []string, getenv func(string) string, hostname string) (config, error) {
	var c config
	fs := daemon.NewFlags("announcerd", "BEACON_ANNOUNCER", getenv, &c.Version)
	var ipam, labels, routerID, grace, keep, bgpHostname string
	str := fs.String
	str(&ipam, "ipam", "127.0.0.1:7400", "comma-separated IPAM (or gateway) gRPC addresses, tried in turn")
	str(&c.Tenant, "tenant", "", "the node's tenant (required)")
	str(&c.Node, "node", hostname, "the node's name (default: the host name)")
	str(&labels, "labels", "", "the node's labels, k=v,k=v")
	str(&routerID, "router-id", "", "BGP router ID (an IPv4 address); default: the first IPv4 address of the node's interfaces")
	str(&c.OpsListen, "ops-listen", "127.0.0.1:7402", "HTTP address for /metrics, /healthz and /readyz")
	str(&grace, "grace", "2s", "how long a node cut off from every IPAM keeps its L2 addresses in place before dropping them (it answers only while the IPAM's last grant lasts, 0.4 s)")
	str(&keep, "keep-routes-on-exit", "false", "on exit, keep BGP routes at graceful-restart peers (planned restarts)")
	str(&c.LocalDevice, "local-addresses-device", "", "bare metal: keep each L2 address the node answers for as a local address on this dummy device (created if missing) and set arp_ignore=1, arp_announce=2; empty: off (Kubernetes nodes, where kube-proxy makes them local)")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	str(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector host:port for traces")
	str(&c.TLSCA, "tls-ca", "", "CA bundle to verify the IPAM with; set to use TLS")
	str(&c.TLSCert, "tls-cert", "", "client certificate (PEM)")
	str(&c.TLSKey, "tls-key", "", "client key (PEM)")
	str(&c.Token, "token", "", "bearer token for the gateway")
	str(&c.TokenFile, "token-file", "", "file holding a bearer token, read again on every connection: in Kubernetes, the pod's projected ServiceAccount token (audience beacon-ipam) that the IPAM checks with a TokenReview; needs --tls-ca")
	str(&c.BootstrapTokenFile, "bootstrap-token-file", "", "bare metal: a one-time bootstrap token (beaconctl certs bootstrap) traded for this node's certificate when --cert-dir holds no valid one; needs --tls-ca and --cert-dir")
	str(&c.CertDir, "cert-dir", "", "directory of the node's certificate (tls.crt, tls.key; mode 0600) obtained with --bootstrap-token-file")
	str(&bgpHostname, "bgp-hostname", "node", "host name sent to BGP peers (hostname capability): 'node' for the node name, 'os' for the OS host name, or a name; "+
		"other than the OS host name, announcerd re-executes itself in its own UTS namespace (needs CAP_SYS_ADMIN)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Version {
		return c, nil
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	c.IPAM = daemon.List(ipam)
	if len(c.IPAM) == 0 {
		errs = append(errs, errors.New("--ipam: at least one address"))
	}
	if c.Tenant == "" {
		errs = append(errs, errors.New("--tenant is required"))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("--node is required (no host name)"))
	}
	c.Labels = map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("--labels: %q is not k=v", kv))
			continue
		}
		c.Labels[k] = v
	}
	if routerID != "" {
		a, err := netip.ParseAddr(routerID)
		if err != nil || !a.Is4() {
			errs = append(errs, fmt.Errorf("--router-id: %q is not an IPv4 address", routerID))
		}
		c.RouterID = a
	}
	d, err := time.ParseDuration(grace)
	if err != nil || d <= 0 {
		errs = append(errs, fmt.Errorf("--grace: %q is not a positive duration", grace))
	}
	c.Grace = d
	switch keep {
	case "true", "1":
		c.KeepRoutesOnExit = true
	case "false", "0", "":
	default:
		errs = append(errs, fmt.Errorf("--keep-routes-on-exit: %q is not a boolean", keep))
	}
	if d := c.LocalDevice; d != "" && (len(d) > 15 || strings.ContainsAny(d, "/: \t\n\v\f\r") || d == "." || d == "..") {
		errs = append(errs, fmt.Errorf("--local-addresses-device: %q is not a valid interface name", d))
	}
	switch bgpHostname {
	case "node":
		c.BGPHostname = c.Node
	case "os", "":
	default:
		c.BGPHostname = bgpHostname
	}
	if len(c.BGPHostname) > 64 {
		errs = append(errs, fmt.Errorf("--bgp-hostname: %q is longer than 64 bytes", c.BGPHostname))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if c.TokenFile != "" && c.Token != "" {
		errs = append(errs, errors.New("--token and --token-file: give one"))
	}
	if c.BootstrapTokenFile != "" {
		switch {
		case c.CertDir == "":
			errs = append(errs, errors.New("--bootstrap-token-file needs --cert-dir"))
		case c.TLSCA == "":
			errs = append(errs, errors.New("--bootstrap-token-file needs --tls-ca: the token is sent only over TLS"))
		case c.TLSCert != "" || c.TokenFile != "" || c.Token != "":
			errs = append(errs, errors.New("--bootstrap-token-file: the certificate comes from --cert-dir; give no --tls-cert, --token or --token-file"))
		}
	}
	if c.TokenFile != "" && c.TLSCA == "" {
		errs = append(errs, errors.New("--token-file needs --tls-ca: a token is sent only over TLS"))
	}
	return c, errors.Join(errs...)
}
