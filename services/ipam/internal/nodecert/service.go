package nodecert

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beaconlb/beacon/pkg/spiffeid"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/access"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// TokenPrefix starts every bootstrap token, so that one is recognised in a
// file or a log it should not be in.
const TokenPrefix = "beacon-bootstrap-"

// Limits on a bootstrap token's life.
const (
	MinTTL = time.Second
	MaxTTL = 7 * 24 * time.Hour
)

// Tokens stores bootstrap tokens (store.BootstrapTokens).
type Tokens interface {
	Create(ctx context.Context, hash []byte, t store.BootstrapToken) error
	Consume(ctx context.Context, hash []byte) (store.BootstrapToken, error)
}

// Service implements ipamv1.CertificateServiceServer.
type Service struct {
	ipamv1.UnimplementedCertificateServiceServer
	tokens      Tokens
	issuer      *Issuer // nil: no --node-issuer-cert
	trustDomain string
	logger      *slog.Logger
	trades      metric.Int64Counter // nil: not counted
}

// New returns the service; issuer may be nil (the service then refuses
// with FAILED_PRECONDITION). meter may be nil.
func New(tokens Tokens, issuer *Issuer, trustDomain string, meter metric.Meter, logger *slog.Logger) (*Service, error) {
	s := &Service{tokens: tokens, issuer: issuer, trustDomain: trustDomain, logger: logger}
	if meter != nil {
		c, err := meter.Int64Counter("beacon.ipam.bootstrap_trades",
			metric.WithDescription("Bootstrap tokens traded for node certificates, by result: issued, or why not (token: unknown, spent or expired; invalid: a bad request)."))
		if err != nil {
			return nil, err
		}
		s.trades = c
	}
	return s, nil
}

// Register registers the service.
func (s *Service) Register(g grpc.ServiceRegistrar) { ipamv1.RegisterCertificateServiceServer(g, s) }

var (
	errNoIssuer   = errors.New("this IPAM signs no node certificates (no --node-issuer-cert)")
	errBadToken   = errors.New("unknown, used or expired bootstrap token")
	errInvalid    = errors.New("invalid argument")
	errTokenTaken = errors.New("token collision")
)

// toStatus turns the service's errors into gRPC status errors; internal
// text never reaches the caller.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errInvalid.Error()+": "))
	case errors.Is(err, ErrCSR):
		return status.Error(codes.InvalidArgument, "csr_pem: not a valid, self-signed PEM certificate signing request")
	case errors.Is(err, errBadToken):
		return status.Error(codes.Unauthenticated, errBadToken.Error())
	case errors.Is(err, errNoIssuer):
		return status.Error(codes.FailedPrecondition, errNoIssuer.Error())
	case errors.Is(err, ipam.ErrUnavailable), errors.Is(err, errTokenTaken):
		return status.Error(codes.Unavailable, "storage unavailable; retry")
	}
	return status.Error(codes.Internal, "internal error")
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", errInvalid, field, fmt.Sprintf(format, args...))
}

// CreateBootstrapToken issues a one-time token for one node.
func (s *Service) CreateBootstrapToken(ctx context.Context, req *ipamv1.CreateBootstrapTokenRequest) (*ipamv1.CreateBootstrapTokenResponse, error) {
	resp, err := s.createBootstrapToken(ctx, req)
	return resp, toStatus(err)
}

func (s *Service) createBootstrapToken(ctx context.Context, req *ipamv1.CreateBootstrapTokenRequest) (*ipamv1.CreateBootstrapTokenResponse, error) {
	if s.issuer == nil {
		return nil, errNoIssuer
	}
	tenant, ok := strings.CutPrefix(req.GetParent(), "tenants/")
	id := spiffeid.ID{TrustDomain: s.trustDomain, Role: spiffeid.Announcer, Tenant: tenant, Name: req.GetNode()}
	if !ok || tenant == "" || strings.Contains(tenant, "/") {
		return nil, invalid("parent", "must be tenants/{tenant}")
	}
	if err := id.Validate(); err != nil {
		return nil, invalid("node", "tenant and node must be lower-case letters, digits, '-', '.' and '_'")
	}
	ttl := req.GetTtl().AsDuration()
	if req.GetTtl() == nil || ttl < MinTTL || ttl > MaxTTL {
		return nil, invalid("ttl", "must be from %s to %s", MinTTL, MaxTTL)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	hash := sha256.Sum256([]byte(token))
	expire := time.Now().Add(ttl)
	err := s.tokens.Create(ctx, hash[:], store.BootstrapToken{Tenant: tenant, Node: id.Name, Expire: expire, Creator: access.Actor(ctx)})
	if errors.Is(err, ipam.ErrAlreadyExists) {
		err = errTokenTaken
	}
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "bootstrap token created", "for", id.String(), "expire", expire, "actor", access.Actor(ctx))
	return &ipamv1.CreateBootstrapTokenResponse{Token: token, ExpireTime: timestamppb.New(expire)}, nil
}

// CreateNodeCertificate trades a bootstrap token for a certificate.
func (s *Service) CreateNodeCertificate(ctx context.Context, req *ipamv1.CreateNodeCertificateRequest) (*ipamv1.CreateNodeCertificateResponse, error) {
	resp, err := s.createNodeCertificate(ctx, req)
	result := "issued"
	switch {
	case errors.Is(err, errBadToken):
		result = "token"
	case errors.Is(err, errInvalid), errors.Is(err, ErrCSR):
		result = "invalid"
	case err != nil:
		result = "error"
	}
	if s.trades != nil {
		s.trades.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	}
	if err != nil {
		s.logger.WarnContext(ctx, "bootstrap token refused", "result", result, "error", err.Error())
	}
	return resp, toStatus(err)
}

func (s *Service) createNodeCertificate(ctx context.Context, req *ipamv1.CreateNodeCertificateRequest) (*ipamv1.CreateNodeCertificateResponse, error) {
	if s.issuer == nil {
		return nil, errNoIssuer
	}
	if !strings.HasPrefix(req.GetBootstrapToken(), TokenPrefix) || len(req.GetBootstrapToken()) > 256 {
		return nil, errBadToken
	}
	if len(req.GetCsrPem()) == 0 || len(req.GetCsrPem()) > 16<<10 {
		return nil, invalid("csr_pem", "required, at most 16 KiB")
	}
	hash := sha256.Sum256([]byte(req.GetBootstrapToken()))
	t, err := s.tokens.Consume(ctx, hash[:])
	if errors.Is(err, store.ErrBootstrapUnknown) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	id := spiffeid.ID{TrustDomain: s.trustDomain, Role: spiffeid.Announcer, Tenant: t.Tenant, Name: t.Node}
	if !time.Now().Before(t.Expire) {
		return nil, fmt.Errorf("%w: the token for %s expired at %s", errBadToken, id, t.Expire)
	}
	// The token is spent even if the CSR is bad: a node that sends a bad
	// one needs a new token, and a stolen token cannot be tried twice.
	cert, notAfter, err := s.issuer.Sign([]byte(req.GetCsrPem()), id)
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "node certificate issued", "for", id.String(), "expire", notAfter, "token_creator", t.Creator)
	return &ipamv1.CreateNodeCertificateResponse{CertificatePem: string(cert), ExpireTime: timestamppb.New(notAfter)}, nil
}
