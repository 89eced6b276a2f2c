package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/beaconlb/beacon/pkg/daemon"
)

// config is ipamd's configuration, from flags with environment fallbacks
// (BEACON_IPAM_ + the flag name in upper case, '-' as '_').
type config struct {
	// Version: print the version and exit (--version).
	Version       bool
	Listen        string
	OpsListen     string
	EtcdEndpoints []string
	DataDir       string
	TLSCert       string
	TLSKey        string
	TLSClientCA   string
	// TrustDomain is the SPIFFE trust domain of callers' identities;
	// StreamsPerCaller caps the streams one adapter or announcer holds.
	TrustDomain      string
	StreamsPerCaller int
	// KubeAnnouncers is the file listing the Kubernetes clusters whose
	// announcers authenticate with a ServiceAccount token.
	KubeAnnouncers string
	// NodeIssuerCert and NodeIssuerKey are the CA that signs the node
	// certificates bootstrap tokens are traded for; NodeCertValidity is
	// how long those last.
	NodeIssuerCert, NodeIssuerKey string
	NodeCertValidity              time.Duration
	ReleaseHold                   time.Duration
	CommitWorkers                 int
	LogLevel                      string
	OTLPEndpoint                  string
	OTLPInsecure                  bool
	ShutdownGrace                 time.Duration
	EtcdCompaction                time.Duration
	EtcdTimeout                   time.Duration
	// EtcdQuotaBytes is the embedded etcd's backend quota, and the quota
	// the metrics report for an external one; EtcdDefragFree is the free
	// share of the embedded member's backend past which ipamd defragments
	// it (0: never).
	EtcdQuotaBytes int64
	EtcdDefragFree float64
	// AuditRetention is how long audit records are kept.
	AuditRetention time.Duration
	// MemoryLimit is the Go runtime's soft memory limit in bytes (0: the
	// runtime's own, from GOMEMLIMIT or none).
	MemoryLimit int64
	// EtcdCA, EtcdCert and EtcdKey secure the connection to an external
	// etcd; EtcdUsername and EtcdPassword authenticate to it.
	EtcdCA, EtcdCert, EtcdKey  string
	EtcdUsername, EtcdPassword string
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	var c config
	var endpoints string
	fs := daemon.NewFlags("ipamd", "BEACON_IPAM", getenv, &c.Version)
	str := fs.String
	str(&c.Listen, "listen", "127.0.0.1:7400", "gRPC listen address")
	str(&c.OpsListen, "ops-listen", "127.0.0.1:7401", "HTTP address for /metrics, /healthz and /readyz")
	str(&endpoints, "etcd-endpoints", "", "comma-separated etcd client URLs; empty: run an embedded etcd")
	str(&c.EtcdCA, "etcd-ca", "", "CA bundle (PEM) that etcd's server certificate chains to; set for https:// endpoints with a private CA")
	str(&c.EtcdCert, "etcd-cert", "", "client certificate (PEM) for etcd's --client-cert-auth; with --etcd-key")
	str(&c.EtcdKey, "etcd-key", "", "client private key (PEM)")
	str(&c.EtcdUsername, "etcd-username", "", "etcd user, when etcd's authentication is on")
	str(&c.EtcdPassword, "etcd-password", "", "etcd password (prefer the environment: BEACON_IPAM_ETCD_PASSWORD)")
	str(&c.DataDir, "data-dir", "beacon-data", "embedded etcd's data directory")
	str(&c.TLSCert, "tls-cert", "", "server certificate (PEM); with --tls-key enables TLS")
	str(&c.TLSKey, "tls-key", "", "server private key (PEM)")
	str(&c.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) that client certificates must chain to; set to require them")
	str(&c.TrustDomain, "trust-domain", "beacon", "SPIFFE trust domain of the callers' client certificates (spiffe://DOMAIN/...; see docs/security.md)")
	str(&c.KubeAnnouncers, "kube-announcers", "", "YAML/JSON file of Kubernetes clusters whose announcers authenticate with their ServiceAccount token, checked with a TokenReview (see docs/security.md); needs --tls-client-ca")
	str(&c.NodeIssuerCert, "node-issuer-cert", "", "CA certificate (PEM) that signs node certificates traded for bootstrap tokens: the CA --tls-client-ca trusts; with --node-issuer-key")
	str(&c.NodeIssuerKey, "node-issuer-key", "", "that CA's private key (PEM)")
	var nodeValidity string
	str(&nodeValidity, "node-cert-validity", "2160h", "how long a node certificate traded for a bootstrap token is valid")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	str(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector host:port for traces; empty: traces not exported")
	var hold, grace, compaction, etcdTimeout, workers, insecure, streams, quota, defrag, audit, memLimit string
	str(&streams, "streams-per-caller", "16", "open streams (Subscribe, WatchAllocations) one adapter or announcer identity may hold at once")
	str(&hold, "release-hold", "10m", "default time released addresses are kept for their owner (0 frees them at once)")
	str(&grace, "shutdown-grace", "10s", "how long in-flight requests may finish on SIGTERM")
	str(&compaction, "etcd-compaction", "1h", "embedded etcd's history retention (bounds watch resume)")
	str(&quota, "etcd-quota-bytes", "8589934592", "etcd's backend quota in bytes: the embedded etcd's (past it etcd raises NOSPACE and refuses writes), and the one the metrics report for an external etcd (set it to that cluster's --quota-backend-bytes)")
	str(&defrag, "etcd-defrag-free-fraction", "0.5", "defragment the embedded etcd when this share of its backend file is free pages (0: never; an external etcd is its operators' to defragment)")
	str(&audit, "audit-retention", "720h", "how long audit records are kept before etcd deletes them (at least 1h)")
	str(&etcdTimeout, "etcd-timeout", "5s", "longest wait for one etcd call before a request fails UNAVAILABLE")
	str(&workers, "commit-workers", "1", "etcd transactions in flight at once (1: pure group commit, fastest against an etcd cluster)")
	str(&insecure, "otlp-insecure", "false", "talk to the OTLP collector without TLS")
	str(&memLimit, "memory-limit", "", "soft limit of the heap and the runtime's memory, in bytes or with a suffix (Ki, Mi, Gi): past it the garbage collector runs more often rather than the process grow (set it to about 90% of the container's memory limit; empty: GOMEMLIMIT's, else none; see docs/operating.md, \"Sizing\")")
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
	dur := func(name, v string, p *time.Duration) {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("--%s: %q is not a non-negative duration", name, v))
		}
		*p = d
	}
	dur("release-hold", hold, &c.ReleaseHold)
	dur("shutdown-grace", grace, &c.ShutdownGrace)
	dur("etcd-compaction", compaction, &c.EtcdCompaction)
	dur("etcd-timeout", etcdTimeout, &c.EtcdTimeout)
	dur("node-cert-validity", nodeValidity, &c.NodeCertValidity)
	dur("audit-retention", audit, &c.AuditRetention)
	if c.AuditRetention < time.Hour {
		errs = append(errs, fmt.Errorf("--audit-retention: at least 1h"))
	}
	if _, err := fmt.Sscanf(quota, "%d", &c.EtcdQuotaBytes); err != nil || c.EtcdQuotaBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("--etcd-quota-bytes: %q is not a number of bytes of at least 64 MiB", quota))
	}
	if memLimit != "" {
		n, err := parseBytes(memLimit)
		if err != nil || n < 64<<20 {
			errs = append(errs, fmt.Errorf("--memory-limit: %q is not a size of at least 64Mi (a number of bytes, or with Ki, Mi or Gi)", memLimit))
		}
		c.MemoryLimit = n
	}
	if _, err := fmt.Sscanf(defrag, "%g", &c.EtcdDefragFree); err != nil || c.EtcdDefragFree < 0 || c.EtcdDefragFree >= 1 {
		errs = append(errs, fmt.Errorf("--etcd-defrag-free-fraction: %q is not a fraction from 0 to below 1", defrag))
	}
	if c.NodeCertValidity < time.Hour {
		errs = append(errs, fmt.Errorf("--node-cert-validity: at least 1h"))
	}
	if c.EtcdTimeout == 0 {
		errs = append(errs, fmt.Errorf("--etcd-timeout: must be positive"))
	}
	if _, err := fmt.Sscanf(workers, "%d", &c.CommitWorkers); err != nil || c.CommitWorkers < 1 || c.CommitWorkers > 64 {
		errs = append(errs, fmt.Errorf("--commit-workers: %q is not a number from 1 to 64", workers))
	}
	if _, err := fmt.Sscanf(streams, "%d", &c.StreamsPerCaller); err != nil || c.StreamsPerCaller < 1 {
		errs = append(errs, fmt.Errorf("--streams-per-caller: %q is not a positive number", streams))
	}
	switch insecure {
	case "true", "1":
		c.OTLPInsecure = true
	case "false", "0", "":
	default:
		errs = append(errs, fmt.Errorf("--otlp-insecure: %q is not a boolean", insecure))
	}
	c.EtcdEndpoints = daemon.List(endpoints)
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		errs = append(errs, errors.New("--etcd-cert and --etcd-key go together"))
	}
	if (c.EtcdUsername == "") != (c.EtcdPassword == "") {
		errs = append(errs, errors.New("--etcd-username and --etcd-password go together"))
	}
	if len(c.EtcdEndpoints) == 0 && (c.EtcdCA != "" || c.EtcdCert != "" || c.EtcdUsername != "") {
		errs = append(errs, errors.New("--etcd-ca, --etcd-cert and --etcd-username are for an external etcd: give --etcd-endpoints"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("--tls-client-ca needs --tls-cert and --tls-key"))
	}
	if (c.NodeIssuerCert == "") != (c.NodeIssuerKey == "") {
		errs = append(errs, errors.New("--node-issuer-cert and --node-issuer-key go together"))
	}
	if c.NodeIssuerCert != "" && c.TLSClientCA == "" {
		errs = append(errs, errors.New("--node-issuer-cert needs --tls-client-ca (the CA that trusts the certificates it signs)"))
	}
	if c.KubeAnnouncers != "" && c.TLSClientCA == "" {
		errs = append(errs, errors.New("--kube-announcers needs --tls-client-ca (tokens are checked only over TLS, beside client certificates)"))
	}
	return c, errors.Join(errs...)
}

// parseBytes parses a size: a number of bytes, or of KiB, MiB or GiB with
// the suffix Ki, Mi or Gi (Kubernetes' spelling) or KiB, MiB or GiB.
func parseBytes(s string) (int64, error) {
	num, shift := s, 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"Ki", 10}, {"Mi", 20}, {"Gi", 30}} {
		if n, ok := strings.CutSuffix(strings.TrimSuffix(s, "B"), u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n << shift, nil
}
