package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/beaconlb/beacon/pkg/daemon"
)

// config is gatewayd's configuration, from flags with environment
// fallbacks (BEACON_GATEWAY_ + the flag name in upper case, '-' as '_').
type config struct {
	// Version: print the version and exit (--version).
	Version            bool
	Listen             string
	OpsListen          string
	IPAM               []string
	IPAMTLSCA          string
	IPAMTLSCert        string
	IPAMTLSKey         string
	IPAMTLSServerName  string
	TLSCert            string
	TLSKey             string
	ClientCA           string
	DevCerts           string
	BootstrapTokenFile string
	TokenCacheTTL      time.Duration
	TokenNegativeTTL   time.Duration
	RateLimit          float64
	RateBurst          int
	RateLimitHold      time.Duration
	AuthFailureRate    float64
	AuthFailureBurst   int
	MaxUnaryTimeout    time.Duration
	MaxRESTBody        int64
	MaxStreamsPerConn  int
	LogLevel           string
	OTLPEndpoint       string
	OTLPInsecure       bool
	ShutdownGrace      time.Duration
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := daemon.NewFlags("gatewayd", "BEACON_GATEWAY", getenv, &c.Version)
	str := fs.String
	var ipam, cacheTTL, negTTL, rateLimit, rateBurst, authRate, authBurst, hold, unary, body, streams, insecure, grace string
	str(&c.Listen, "listen", "127.0.0.1:8443", "TLS address serving gRPC, REST (/v1/...), /openapi.json and the console")
	str(&c.OpsListen, "ops-listen", "127.0.0.1:8444", "HTTP address for /metrics, /healthz and /readyz")
	str(&ipam, "ipam", "127.0.0.1:7400", "comma-separated host:port of the IPAM replicas")
	str(&c.IPAMTLSCA, "ipam-tls-ca", "", "CA bundle (PEM) of the IPAM's server certificate; empty: plaintext to the IPAM")
	str(&c.IPAMTLSCert, "ipam-tls-cert", "", "client certificate (PEM) for the IPAM, if it requires one")
	str(&c.IPAMTLSKey, "ipam-tls-key", "", "client key (PEM) for the IPAM")
	str(&c.IPAMTLSServerName, "ipam-tls-server-name", "", "name to verify the IPAM's certificate against (default: host of the first --ipam)")
	str(&c.TLSCert, "tls-cert", "", "server certificate (PEM); required unless --dev-certs")
	str(&c.TLSKey, "tls-key", "", "server private key (PEM)")
	str(&c.ClientCA, "client-ca", "", "CA bundle (PEM) for client certificates; empty: bearer tokens only")
	str(&c.DevCerts, "dev-certs", "", "directory of development certificates, made if missing (local runs only; never check it in)")
	str(&c.BootstrapTokenFile, "bootstrap-token-file", "", "file holding an admin bearer secret, made with a fresh one if missing")
	str(&cacheTTL, "token-cache-ttl", "10s", "how long a verified token is trusted without asking the IPAM (bounds revocation delay)")
	str(&negTTL, "token-negative-ttl", "2s", "how long an unknown token is refused without asking the IPAM")
	str(&rateLimit, "rate-limit", "100", "calls per second per tenant and role (0: no limit)")
	str(&rateBurst, "rate-burst", "200", "calls a tenant and role may make at once above the rate")
	str(&hold, "rate-limit-hold", "250ms", "about how long a rate-limited call waits before it is refused (jittered ±50%; 0s: not at all)")
	str(&authRate, "auth-failure-rate", "5", "failed authentications per second per client network (IPv4 /32, IPv6 /64) before its unknown tokens are refused unverified (0: no limit)")
	str(&authBurst, "auth-failure-burst", "20", "failed authentications a client network may make at once above the rate")
	str(&unary, "max-unary-timeout", "30s", "longest deadline of a unary call (streams have none)")
	str(&body, "max-rest-body", "1048576", "largest REST request body in bytes")
	str(&streams, "max-streams-per-conn", "100", "concurrent gRPC streams per client connection")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	str(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector host:port for traces; empty: traces not exported")
	str(&insecure, "otlp-insecure", "false", "talk to the OTLP collector without TLS")
	str(&grace, "shutdown-grace", "10s", "how long unary calls in flight may finish on SIGTERM")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Version {
		return c, nil
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	dur := func(name, v string, p *time.Duration, positive bool) {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (positive && d == 0) {
			if positive {
				errs = append(errs, fmt.Errorf("--%s: %q is not a positive duration", name, v))
			} else {
				errs = append(errs, fmt.Errorf("--%s: %q is not a non-negative duration", name, v))
			}
		}
		*p = d
	}
	dur("token-cache-ttl", cacheTTL, &c.TokenCacheTTL, true)
	dur("token-negative-ttl", negTTL, &c.TokenNegativeTTL, true)
	dur("max-unary-timeout", unary, &c.MaxUnaryTimeout, true)
	dur("rate-limit-hold", hold, &c.RateLimitHold, false)
	dur("shutdown-grace", grace, &c.ShutdownGrace, true)
	var err error
	if c.RateLimit, err = strconv.ParseFloat(rateLimit, 64); err != nil || c.RateLimit < 0 {
		errs = append(errs, fmt.Errorf("--rate-limit: %q is not a non-negative number", rateLimit))
	}
	if c.RateBurst, err = strconv.Atoi(rateBurst); err != nil || c.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("--rate-burst: %q is not a positive integer", rateBurst))
	}
	if c.AuthFailureRate, err = strconv.ParseFloat(authRate, 64); err != nil || c.AuthFailureRate < 0 {
		errs = append(errs, fmt.Errorf("--auth-failure-rate: %q is not a non-negative number", authRate))
	}
	if c.AuthFailureBurst, err = strconv.Atoi(authBurst); err != nil || c.AuthFailureBurst < 1 {
		errs = append(errs, fmt.Errorf("--auth-failure-burst: %q is not a positive integer", authBurst))
	}
	if c.MaxRESTBody, err = strconv.ParseInt(body, 10, 64); err != nil || c.MaxRESTBody < 1 {
		errs = append(errs, fmt.Errorf("--max-rest-body: %q is not a positive integer", body))
	}
	if c.MaxStreamsPerConn, err = strconv.Atoi(streams); err != nil || c.MaxStreamsPerConn < 1 {
		errs = append(errs, fmt.Errorf("--max-streams-per-conn: %q is not a positive integer", streams))
	}
	switch insecure {
	case "true", "1":
		c.OTLPInsecure = true
	case "false", "0", "":
	default:
		errs = append(errs, fmt.Errorf("--otlp-insecure: %q is not a boolean", insecure))
	}
	c.IPAM = daemon.List(ipam)
	if len(c.IPAM) == 0 {
		errs = append(errs, errors.New("--ipam: at least one host:port"))
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	case c.DevCerts != "" && c.TLSCert != "":
		errs = append(errs, errors.New("--dev-certs and --tls-cert exclude each other"))
	case c.DevCerts == "" && c.TLSCert == "":
		errs = append(errs, errors.New("the gateway serves TLS only: give --tls-cert and --tls-key, or --dev-certs DIR for a local run"))
	}
	if (c.IPAMTLSCert == "") != (c.IPAMTLSKey == "") {
		errs = append(errs, errors.New("--ipam-tls-cert and --ipam-tls-key go together"))
	}
	if c.IPAMTLSCert != "" && c.IPAMTLSCA == "" {
		errs = append(errs, errors.New("--ipam-tls-cert needs --ipam-tls-ca"))
	}
	return c, errors.Join(errs...)
}
