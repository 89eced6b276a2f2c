// Package tokenreview authenticates announcers that run in Kubernetes by
// their projected, audience-bound ServiceAccount token: it asks the API
// server of the token's cluster with a TokenReview, requires the audience
// and an allowed ServiceAccount, and takes the node the announcer speaks for
// from the token's node claim. It is the only package of the IPAM that
// imports client-go.
package tokenreview

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultAudience is the audience a token must carry when a cluster names
// none.
const DefaultAudience = "beacon-ipam"

// Config is the --kube-announcers file: the clusters whose announcers may
// authenticate with a ServiceAccount token.
type Config struct {
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one Kubernetes cluster whose announcers belong to one tenant.
type Cluster struct {
	// Name names the cluster in logs and metrics.
	Name string `json:"name"`
	// Tenant is the tenant the cluster's nodes announce for.
	Tenant string `json:"tenant"`
	// Server is the API server's URL (https://HOST:PORT).
	Server string `json:"server"`
	// CAFile is the CA bundle (PEM) the API server's certificate chains to.
	CAFile string `json:"caFile"`
	// TokenFile holds the bearer token ipamd creates TokenReviews with (a
	// ServiceAccount bound to system:auth-delegator); it is read again on
	// every request, so a rotated token is picked up.
	TokenFile string `json:"tokenFile"`
	// Audience is the audience the announcers' tokens must carry (default
	// beacon-ipam).
	Audience string `json:"audience,omitempty"`
	// ServiceAccounts are the ServiceAccounts ("NAMESPACE/NAME") whose
	// tokens are announcers' tokens.
	ServiceAccounts []string `json:"serviceAccounts"`
}

// ErrConfig is an invalid --kube-announcers file.
var ErrConfig = errors.New("tokenreview: invalid configuration")

// LoadConfig reads and checks a --kube-announcers file (YAML or JSON).
// ${NAME} in it is replaced by getenv(NAME) first, so that a manifest can
// fill in values it holds elsewhere (deploy/k8s passes the tenant from the
// ConfigMap beacon-config as BEACON_KUBE_TENANT); a name getenv does not
// know is an error.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("kube announcers: %w", err)
	}
	var missing []string
	expanded := os.Expand(string(b), func(name string) string {
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("%w: %s: no value for %s in the environment", ErrConfig, path, strings.Join(missing, ", "))
	}
	return ParseConfig([]byte(expanded))
}

// ParseConfig parses and checks a --kube-announcers file's content.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(c.Clusters) == 0 {
		return Config{}, fmt.Errorf("%w: no clusters", ErrConfig)
	}
	var errs []error
	names := map[string]bool{}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		field := func(f string) string { return fmt.Sprintf("clusters[%d].%s", i, f) }
		if cl.Audience == "" {
			cl.Audience = DefaultAudience
		}
		if cl.Name == "" {
			errs = append(errs, fmt.Errorf("%s: required", field("name")))
		} else if names[cl.Name] {
			errs = append(errs, fmt.Errorf("%s: %q twice", field("name"), cl.Name))
		}
		names[cl.Name] = true
		if cl.Tenant == "" {
			errs = append(errs, fmt.Errorf("%s: required", field("tenant")))
		}
		if !strings.HasPrefix(cl.Server, "https://") {
			errs = append(errs, fmt.Errorf("%s: %q is not an https:// URL", field("server"), cl.Server))
		}
		if cl.CAFile == "" {
			errs = append(errs, fmt.Errorf("%s: required (the API server's CA)", field("caFile")))
		}
		if cl.TokenFile == "" {
			errs = append(errs, fmt.Errorf("%s: required (ipamd's own token for TokenReviews)", field("tokenFile")))
		}
		if len(cl.ServiceAccounts) == 0 {
			errs = append(errs, fmt.Errorf("%s: at least one NAMESPACE/NAME", field("serviceAccounts")))
		}
		for _, sa := range cl.ServiceAccounts {
			ns, name, ok := strings.Cut(sa, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				errs = append(errs, fmt.Errorf("%s: %q is not NAMESPACE/NAME", field("serviceAccounts"), sa))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// username is the user name of a ServiceAccount's tokens.
func username(sa string) string {
	ns, name, _ := strings.Cut(sa, "/")
	return "system:serviceaccount:" + ns + ":" + name
}
