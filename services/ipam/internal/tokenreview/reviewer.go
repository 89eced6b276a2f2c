package tokenreview

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
)

// NodeNameKey is the user extra in which the API server reports the node a
// Pod-bound (or Node-bound) token belongs to: the node the Pod was
// scheduled to when the token was issued (Kubernetes 1.30 and later).
const NodeNameKey = "authentication.kubernetes.io/node-name"

// Identity is who a token authenticates: an announcer of one node of one
// tenant.
type Identity struct {
	Cluster string
	Tenant  string
	Node    string
	// ServiceAccount is "NAMESPACE/NAME".
	ServiceAccount string
}

// ErrRefused is a token that does not authenticate an announcer; the
// wrapped text says why (for logs, not for callers).
var ErrRefused = errors.New("token refused")

// ErrUnavailable is a review that could not be made (no API server
// answered); the caller may retry.
var ErrUnavailable = errors.New("token review unavailable")

// Options tune a Reviewer.
type Options struct {
	// MaxCache bounds how long a review's result is kept (default 1 min);
	// an accepted token is kept at most until it expires.
	MaxCache time.Duration
	// RefusedCache is how long a refusal is kept (default 10 s), so that
	// one bad token repeated does not become a review each time.
	RefusedCache time.Duration
	// CacheSize bounds the number of results kept (default 10,000).
	CacheSize int
	Meter     metric.Meter
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

type cluster struct {
	cfg    Cluster
	client authclient.TokenReviewInterface
}

type cached struct {
	id    Identity
	err   error
	until time.Time
}

// Reviewer authenticates tokens with TokenReviews.
type Reviewer struct {
	clusters []cluster
	opts     Options
	logger   *slog.Logger
	reviews  metric.Int64Counter

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached
}

// New returns a Reviewer for cfg's clusters. It starts nothing.
func New(cfg Config, logger *slog.Logger, opts Options) (*Reviewer, error) {
	if opts.MaxCache <= 0 {
		opts.MaxCache = time.Minute
	}
	if opts.RefusedCache <= 0 {
		opts.RefusedCache = 10 * time.Second
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Reviewer{opts: opts, logger: logger, cache: map[[sha256.Size]byte]cached{}}
	for _, c := range cfg.Clusters {
		rc := &rest.Config{
			Host:            c.Server,
			TLSClientConfig: rest.TLSClientConfig{CAFile: c.CAFile},
			BearerTokenFile: c.TokenFile,
			Timeout:         10 * time.Second,
			UserAgent:       "beacon-ipamd",
		}
		cl, err := authclient.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("kube announcers: cluster %q: %w", c.Name, err)
		}
		r.clusters = append(r.clusters, cluster{cfg: c, client: cl.TokenReviews()})
	}
	if opts.Meter != nil {
		c, err := opts.Meter.Int64Counter("beacon.ipam.token_reviews",
			metric.WithDescription("TokenReviews ipamd made of announcers' ServiceAccount tokens, by result (accepted, or why not)."))
		if err != nil {
			return nil, err
		}
		r.reviews = c
	}
	return r, nil
}

// Authenticate returns the announcer token authenticates. It wraps
// ErrRefused when the token is not an allowed announcer's, ErrUnavailable
// when no cluster could be asked.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (Identity, error) {
	now := r.opts.Now()
	key := sha256.Sum256([]byte(token))
	r.mu.Lock()
	if c, ok := r.cache[key]; ok && now.Before(c.until) {
		r.mu.Unlock()
		return c.id, c.err
	}
	r.mu.Unlock()

	claims, ok := parseClaims(token)
	if !ok {
		r.count(ctx, "malformed")
		return Identity{}, fmt.Errorf("%w: not a JWT", ErrRefused)
	}
	// Tokens of other clusters fail the review of each cluster that did not
	// sign them; the first cluster that accepts the token decides.
	var refusals, failures []error
	for _, c := range r.clusters {
		id, result, err := r.review(ctx, c, token)
		r.count(ctx, result)
		switch {
		case err == nil:
			until := now.Add(r.opts.MaxCache)
			if exp := time.Unix(claims.Exp, 0); claims.Exp != 0 && exp.Before(until) {
				until = exp
			}
			r.remember(key, cached{id: id, until: until}, now)
			r.logger.DebugContext(ctx, "token reviewed", "cluster", id.Cluster, "service_account", id.ServiceAccount, "node", id.Node, "cached_until", until)
			return id, nil
		case errors.Is(err, ErrRefused):
			refusals = append(refusals, err)
		default:
			failures = append(failures, err)
		}
	}
	if len(failures) > 0 {
		// Not cached: the cluster that would accept it may be back soon.
		return Identity{}, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(append(failures, refusals...)...))
	}
	err := errors.Join(refusals...)
	r.remember(key, cached{err: err, until: now.Add(r.opts.RefusedCache)}, now)
	return Identity{}, err
}

// review asks one cluster; result is the metric's label.
func (r *Reviewer) review(ctx context.Context, c cluster, token string) (Identity, string, error) {
	tr, err := c.client.Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{c.cfg.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, "error", fmt.Errorf("cluster %q: TokenReview: %w", c.cfg.Name, err)
	}
	st := tr.Status
	refuse := func(result, format string, args ...any) (Identity, string, error) {
		return Identity{}, result, fmt.Errorf("%w: cluster %q: %s", ErrRefused, c.cfg.Name, fmt.Sprintf(format, args...))
	}
	if !st.Authenticated {
		// A token for another audience is not authenticated either when
		// the review names an audience.
		return refuse("unauthenticated", "not authenticated (wrong audience, expired, or not this cluster's): %s", st.Error)
	}
	if !slices.Contains(st.Audiences, c.cfg.Audience) {
		return refuse("wrong_audience", "the token is not for audience %q", c.cfg.Audience)
	}
	sa := ""
	for _, s := range c.cfg.ServiceAccounts {
		if st.User.Username == username(s) {
			sa = s
		}
	}
	if sa == "" {
		return refuse("service_account", "%q is not an allowed ServiceAccount", st.User.Username)
	}
	nodes := st.User.Extra[NodeNameKey]
	if len(nodes) != 1 || nodes[0] == "" {
		return refuse("no_node", "the token of %s carries no node name (bind it to a Pod on a node: a projected token)", sa)
	}
	return Identity{Cluster: c.cfg.Name, Tenant: c.cfg.Tenant, Node: nodes[0], ServiceAccount: sa}, "accepted", nil
}

func (r *Reviewer) count(ctx context.Context, result string) {
	if r.reviews != nil {
		r.reviews.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	}
}

// remember caches c, first dropping what expired when the cache is full;
// a full cache of live results keeps them and does not cache c.
func (r *Reviewer) remember(key [sha256.Size]byte, c cached, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= r.opts.CacheSize {
		for k, v := range r.cache {
			if !now.Before(v.until) {
				delete(r.cache, k)
			}
		}
		if len(r.cache) >= r.opts.CacheSize {
			return
		}
	}
	r.cache[key] = c
}

type claims struct {
	Exp int64 `json:"exp"`
}

// parseClaims reads a JWT's payload without checking its signature (the
// API server does): only to bound how long an accepted review is cached.
func parseClaims(token string) (claims, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(token) > 16<<10 {
		return claims{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}, false
	}
	var c claims
	if json.Unmarshal(b, &c) != nil {
		return claims{}, false
	}
	return c, true
}
