package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/beaconlb/beacon/pkg/daemon"
)

// config is the adapter's configuration, from flags with environment
// fallbacks (BEACON_K8S_ + the flag name in upper case, '-' as '_').
type config struct {
	// Version: print the version and exit (--version).
	Version          bool
	IPAM             []string
	Tenant           string
	Kubeconfig       string
	Class            string
	AlsoUnclassed    bool
	Workers          int
	ResyncPeriod     time.Duration
	ReleaseHold      *time.Duration
	MetalLBHold      time.Duration
	WebhookListen    string
	WebhookCert      string
	WebhookKey       string
	MetalLBNamespace string
	SyncNodes        bool
	LeaderElect      bool
	LeaseNamespace   string
	LeaseName        string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	KubeQPS          float32
	KubeBurst        int
	OpsListen        string
	LogLevel         string
	OTLPEndpoint     string
	TLSCA            string
	TLSCert          string
	TLSKey           string
	Token            string
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := daemon.NewFlags("k8s-adapter", "BEACON_K8S", getenv, &c.Version)
	leaseNS := getenv("POD_NAMESPACE")
	if leaseNS == "" {
		leaseNS = "beacon-system"
	}
	str := fs.String
	var ipam, unclassed, workers, resync, hold, mlbHold, syncNodes, elect, leaseDur, renew, retryP, qps, burst string
	str(&ipam, "ipam", "127.0.0.1:7400", "comma-separated IPAM (or gateway) gRPC addresses")
	str(&c.Tenant, "tenant", "", "the cluster's IPAM tenant (required)")
	str(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: the in-cluster config")
	str(&c.Class, "class", "beacon.io/lb", "the spec.loadBalancerClass the adapter answers to")
	str(&unclassed, "also-unclassed", "true", "also take LoadBalancer Services with no class, as MetalLB does")
	str(&workers, "workers", "16", "Services reconciled at once")
	str(&resync, "resync-period", "10m", "re-check every Service this often (0: only on changes)")
	str(&hold, "release-hold", "", "keep a released Service's addresses for it this long; empty: the IPAM's default")
	str(&mlbHold, "metallb-release-hold", "0s", "--release-hold for Services managed through MetalLB (its annotations or imported pools); 0s frees their addresses at once, as MetalLB does")
	str(&c.WebhookListen, "webhook-listen", "", "HTTPS address of the validating webhook for IPAddressPools (\":9443\"); empty: no webhook")
	str(&c.WebhookCert, "webhook-cert", "/etc/beacon/webhook/tls.crt", "the webhook's TLS certificate (PEM; a Secret's tls.crt)")
	str(&c.WebhookKey, "webhook-key", "/etc/beacon/webhook/tls.key", "the webhook's TLS key (PEM; a Secret's tls.key)")
	str(&c.MetalLBNamespace, "metallb-namespace", "metallb-system", "namespace of MetalLB's configuration resources to import; empty: do not import")
	str(&syncNodes, "sync-nodes", "true", "keep the tenant's IPAM Nodes (labels for node selectors, exclude-from-external-load-balancers) equal to the cluster's Nodes")
	str(&elect, "leader-elect", "true", "take a Lease so that one replica acts at a time")
	str(&c.LeaseNamespace, "leader-elect-namespace", leaseNS, "the Lease's namespace (default: $POD_NAMESPACE, else beacon-system)")
	str(&c.LeaseName, "leader-elect-name", "beacon-k8s-adapter", "the Lease's name")
	str(&leaseDur, "lease-duration", "8s", "how long a dead leader keeps the Lease")
	str(&renew, "renew-deadline", "5s", "how long the leader tries to renew before giving up")
	str(&retryP, "retry-period", "1s", "how often standbys try to take the Lease")
	str(&qps, "kube-api-qps", "300", "requests per second to the API server")
	str(&burst, "kube-api-burst", "600", "burst of requests to the API server")
	str(&c.OpsListen, "ops-listen", "127.0.0.1:7403", "HTTP address for /metrics, /healthz and /readyz")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	str(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector host:port for traces")
	str(&c.TLSCA, "tls-ca", "", "CA bundle to verify the IPAM with; set to use TLS")
	str(&c.TLSCert, "tls-cert", "", "client certificate (PEM)")
	str(&c.TLSKey, "tls-key", "", "client key (PEM)")
	str(&c.Token, "token", "", "bearer token for the gateway")
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
	switch {
	case c.Tenant == "":
		errs = append(errs, errors.New("--tenant is required"))
	case !validTenant(c.Tenant):
		errs = append(errs, fmt.Errorf("--tenant %q: must be 1-63 lower-case letters, digits and '-', starting with a letter or digit and not ending with '-' (the IPAM's tenant IDs)", c.Tenant))
	}
	if c.Class == "" {
		errs = append(errs, errors.New("--class must not be empty"))
	}
	boolean := func(name, v string, p *bool) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %q is not a boolean", name, v))
		}
		*p = b
	}
	boolean("also-unclassed", unclassed, &c.AlsoUnclassed)
	boolean("leader-elect", elect, &c.LeaderElect)
	boolean("sync-nodes", syncNodes, &c.SyncNodes)
	dur := func(name, v string, positive bool) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (positive && d == 0) {
			errs = append(errs, fmt.Errorf("--%s: %q is not a %s duration", name, v, map[bool]string{true: "positive", false: "non-negative"}[positive]))
		}
		return d
	}
	c.ResyncPeriod = dur("resync-period", resync, false)
	if hold != "" {
		d := dur("release-hold", hold, false)
		c.ReleaseHold = &d
	}
	c.MetalLBHold = dur("metallb-release-hold", mlbHold, false)
	c.LeaseDuration = dur("lease-duration", leaseDur, true)
	c.RenewDeadline = dur("renew-deadline", renew, true)
	c.RetryPeriod = dur("retry-period", retryP, true)
	if c.LeaderElect && (c.RetryPeriod >= c.RenewDeadline || c.RenewDeadline >= c.LeaseDuration) {
		errs = append(errs, errors.New("leader election needs --retry-period < --renew-deadline < --lease-duration"))
	}
	integer := func(name, v string, lo, hi int) int {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("--%s: %q is not a number from %d to %d", name, v, lo, hi))
		}
		return n
	}
	c.Workers = integer("workers", workers, 1, 256)
	c.KubeQPS = float32(integer("kube-api-qps", qps, 1, 100000))
	c.KubeBurst = integer("kube-api-burst", burst, 1, 100000)
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	return c, errors.Join(errs...)
}

// validTenant reports whether s is an IPAM tenant ID: 1-63 lower-case
// letters, digits and '-', starting with a letter or digit and not ending
// with '-'. Checked here so that a typo fails at start, not at every call.
func validTenant(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
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
