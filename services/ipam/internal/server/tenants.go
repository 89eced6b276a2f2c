package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

type tenantService struct {
	ipamv1.UnsafeTenantServiceServer
	s *Server
}

func (t *tenantService) toProto(tn *ipam.Tenant, rev int64) *ipamv1.Tenant {
	return &ipamv1.Tenant{
		Name: "tenants/" + tn.ID, Uid: tn.UID, DisplayName: tn.DisplayName, MaxAddresses: tn.MaxAddresses,
		AddressesUsed: t.s.usage.Used(tn.ID), AddressesHeld: t.s.usage.Held(tn.ID), Etag: etag(rev), CreateTime: ts(tn.CreateTime), UpdateTime: ts(tn.UpdateTime),
	}
}

func tenantFields(fes *ipam.FieldErrors, in *ipamv1.Tenant) *ipam.Tenant {
	if len(in.GetDisplayName()) > 256 {
		fes.Add("tenant.display_name", "must be at most 256 bytes")
	}
	return &ipam.Tenant{DisplayName: in.GetDisplayName(), MaxAddresses: in.GetMaxAddresses()}
}

func (t *tenantService) CreateTenant(ctx context.Context, req *ipamv1.CreateTenantRequest) (*ipamv1.CreateTenantResponse, error) {
	const method = "CreateTenant"
	var fes ipam.FieldErrors
	if !validTenant(req.GetTenantId()) {
		fes.Add("tenant_id", "must be 1-63 lower-case letters, digits and '-'")
	}
	tn := tenantFields(&fes, req.GetTenant())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	tn.ID = req.GetTenantId()
	stamp := func(uid string, now time.Time) { tn.UID, tn.CreateTime, tn.UpdateTime = uid, now, now }
	res, err := t.s.w.CreateConfig(ctx, ipam.Ref{Kind: ipam.KindTenant, ID: tn.ID}, tn, stamp, false, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	return &ipamv1.CreateTenantResponse{Tenant: t.toProto(res.Value.(*ipam.Tenant), res.Rev)}, nil
}

func (t *tenantService) GetTenant(ctx context.Context, req *ipamv1.GetTenantRequest) (*ipamv1.GetTenantResponse, error) {
	var fes ipam.FieldErrors
	id := parseParent(&fes, "name", req.GetName(), false)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, t.s.logger, "GetTenant", err)
	}
	res, err := t.s.w.GetConfig(ctx, ipam.Ref{Kind: ipam.KindTenant, ID: id})
	if err != nil {
		return nil, toStatus(ctx, t.s.logger, "GetTenant", err)
	}
	return &ipamv1.GetTenantResponse{Tenant: t.toProto(res.Value.(*ipam.Tenant), res.Rev)}, nil
}

func (t *tenantService) ListTenants(ctx context.Context, req *ipamv1.ListTenantsRequest) (*ipamv1.ListTenantsResponse, error) {
	const method = "ListTenants"
	var fes ipam.FieldErrors
	size := pageSize(&fes, "page_size", req.GetPageSize())
	q := queryHash("tenants")
	after := t.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	page, err := t.s.r.List(ctx, ipam.KindTenant, "", after, size, 0)
	if err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	resp := &ipamv1.ListTenantsResponse{}
	for _, ev := range page.Items {
		resp.Tenants = append(resp.Tenants, t.toProto(ev.Value.(*ipam.Tenant), ev.Rev))
	}
	if page.More && len(page.Items) > 0 {
		resp.NextPageToken = t.s.pages.encode(page.Items[len(page.Items)-1].Ref.ID, q)
	}
	return resp, nil
}

func (t *tenantService) UpdateTenant(ctx context.Context, req *ipamv1.UpdateTenantRequest) (*ipamv1.UpdateTenantResponse, error) {
	const method = "UpdateTenant"
	var fes ipam.FieldErrors
	id := parseParent(&fes, "tenant.name", req.GetTenant().GetName(), false)
	etagRev := parseEtag(&fes, "tenant.etag", req.GetTenant().GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		fes.Add("update_mask", "must name at least one field (or \"*\")")
	}
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	next := func(cur any, now time.Time) (any, error) {
		var fes ipam.FieldErrors
		old := cur.(*ipam.Tenant)
		merged := applyMask(&fes, t.toProto(old, 0), req.GetTenant(), paths, []string{"display_name", "max_addresses"})
		tn := tenantFields(&fes, merged)
		if err := fes.Err(); err != nil {
			return nil, err
		}
		tn.ID, tn.UID, tn.CreateTime, tn.UpdateTime = old.ID, old.UID, old.CreateTime, now
		return tn, nil
	}
	res, err := t.s.w.UpdateConfig(ctx, ipam.Ref{Kind: ipam.KindTenant, ID: id}, etagRev, next, false, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	return &ipamv1.UpdateTenantResponse{Tenant: t.toProto(res.Value.(*ipam.Tenant), res.Rev)}, nil
}

func (t *tenantService) DeleteTenant(ctx context.Context, req *ipamv1.DeleteTenantRequest) (*ipamv1.DeleteTenantResponse, error) {
	const method = "DeleteTenant"
	var fes ipam.FieldErrors
	id := parseParent(&fes, "name", req.GetName(), false)
	etagRev := parseEtag(&fes, "etag", req.GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	if err := t.s.w.DeleteConfig(ctx, ipam.Ref{Kind: ipam.KindTenant, ID: id}, etagRev, 0, nil, meta(ctx, method, req.GetRequestId(), req)); err != nil {
		return nil, toStatus(ctx, t.s.logger, method, err)
	}
	return &ipamv1.DeleteTenantResponse{}, nil
}

type tokenService struct {
	ipamv1.UnsafeTokenServiceServer
	s *Server
}

// secretPrefix marks Beacon token secrets, so they are easy to spot in
// logs and secret scanners.
const secretPrefix = "bct_"

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func tokenToProto(tk *ipam.Token) *ipamv1.Token {
	out := &ipamv1.Token{Name: "tokens/" + tk.ID, Uid: tk.UID, Description: tk.Description, Role: ipamv1.Role(tk.Role), CreateTime: ts(tk.CreateTime)}
	if tk.Tenant != "" {
		out.Tenant = "tenants/" + tk.Tenant
	}
	if !tk.ExpireTime.IsZero() {
		out.ExpireTime = timestamppb.New(tk.ExpireTime)
	}
	return out
}

func (k *tokenService) CreateToken(ctx context.Context, req *ipamv1.CreateTokenRequest) (*ipamv1.CreateTokenResponse, error) {
	const method = "CreateToken"
	var fes ipam.FieldErrors
	if !validID(req.GetTokenId()) {
		fes.Add("token_id", "%s", idRule)
	}
	in := req.GetToken()
	tk := &ipam.Token{ID: req.GetTokenId(), Description: in.GetDescription(), Role: ipam.Role(in.GetRole())}
	switch in.GetRole() {
	case ipamv1.Role_ROLE_ADMIN, ipamv1.Role_ROLE_VIEWER:
		if in.GetTenant() != "" {
			fes.Add("token.tenant", "must be empty for admin and viewer tokens")
		}
	case ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER:
		tk.Tenant = parseParent(&fes, "token.tenant", in.GetTenant(), false)
	default:
		fes.Add("token.role", "must be ROLE_ADMIN, ROLE_TENANT, ROLE_ANNOUNCER or ROLE_VIEWER")
	}
	if len(tk.Description) > 256 {
		fes.Add("token.description", "must be at most 256 bytes")
	}
	if in.GetExpireTime() != nil {
		if err := in.GetExpireTime().CheckValid(); err != nil {
			fes.Add("token.expire_time", "is not a valid time")
		} else {
			tk.ExpireTime = in.GetExpireTime().AsTime()
		}
	}
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	secret := secretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	var uid [16]byte
	_, _ = rand.Read(uid[:])
	tk.UID, tk.CreateTime, tk.Hash = hex.EncodeToString(uid[:]), time.Now().UTC(), hashSecret(secret)
	res, err := k.s.w.CreateObjects(ctx, []ipam.Put{
		{Ref: ipam.Ref{Kind: ipam.KindToken, ID: tk.ID}, Value: tk},
		{Ref: ipam.Ref{Kind: ipam.KindTokenHash, ID: tk.Hash}, Value: &ipam.TokenHash{Token: tk.ID}},
	}, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	if res.Replayed {
		// The secret is not kept (only its hash): a retry gets the token
		// without it.
		return &ipamv1.CreateTokenResponse{Token: tokenToProto(res.Value.(*ipam.Token))}, nil
	}
	return &ipamv1.CreateTokenResponse{Token: tokenToProto(tk), Secret: secret}, nil
}

func (k *tokenService) parseName(fes *ipam.FieldErrors, name string) string {
	id, ok := strings.CutPrefix(name, "tokens/")
	if !ok || !validID(id) {
		fes.Add("name", "must be tokens/{token}")
	}
	return id
}

func (k *tokenService) GetToken(ctx context.Context, req *ipamv1.GetTokenRequest) (*ipamv1.GetTokenResponse, error) {
	var fes ipam.FieldErrors
	id := k.parseName(&fes, req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, k.s.logger, "GetToken", err)
	}
	res, err := k.s.w.GetConfig(ctx, ipam.Ref{Kind: ipam.KindToken, ID: id})
	if err != nil {
		return nil, toStatus(ctx, k.s.logger, "GetToken", err)
	}
	return &ipamv1.GetTokenResponse{Token: tokenToProto(res.Value.(*ipam.Token))}, nil
}

func (k *tokenService) ListTokens(ctx context.Context, req *ipamv1.ListTokensRequest) (*ipamv1.ListTokensResponse, error) {
	const method = "ListTokens"
	var fes ipam.FieldErrors
	size := pageSize(&fes, "page_size", req.GetPageSize())
	q := queryHash("tokens")
	after := k.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	page, err := k.s.r.List(ctx, ipam.KindToken, "", after, size, 0)
	if err != nil {
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	resp := &ipamv1.ListTokensResponse{}
	for _, ev := range page.Items {
		resp.Tokens = append(resp.Tokens, tokenToProto(ev.Value.(*ipam.Token)))
	}
	if page.More && len(page.Items) > 0 {
		resp.NextPageToken = k.s.pages.encode(page.Items[len(page.Items)-1].Ref.ID, q)
	}
	return resp, nil
}

func (k *tokenService) DeleteToken(ctx context.Context, req *ipamv1.DeleteTokenRequest) (*ipamv1.DeleteTokenResponse, error) {
	var fes ipam.FieldErrors
	id := k.parseName(&fes, req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, k.s.logger, "DeleteToken", err)
	}
	ref := ipam.Ref{Kind: ipam.KindToken, ID: id}
	res, err := k.s.w.GetConfig(ctx, ref)
	if err != nil {
		return nil, toStatus(ctx, k.s.logger, "DeleteToken", err)
	}
	tk := res.Value.(*ipam.Token)
	if err := k.s.w.DeleteObjects(ctx, res.Rev, ref, ipam.Ref{Kind: ipam.KindTokenHash, ID: tk.Hash}); err != nil {
		return nil, toStatus(ctx, k.s.logger, "DeleteToken", err)
	}
	return &ipamv1.DeleteTokenResponse{}, nil
}

func (k *tokenService) VerifyToken(ctx context.Context, req *ipamv1.VerifyTokenRequest) (*ipamv1.VerifyTokenResponse, error) {
	const method = "VerifyToken"
	if !strings.HasPrefix(req.GetSecret(), secretPrefix) || len(req.GetSecret()) > 128 {
		return nil, toStatus(ctx, k.s.logger, method, ipam.Refuse(ipam.ErrNotFound, "unknown token"))
	}
	h, err := k.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindTokenHash, ID: hashSecret(req.GetSecret())})
	if err != nil {
		if errors.Is(err, ipam.ErrNotFound) {
			err = ipam.Refuse(ipam.ErrNotFound, "unknown token")
		}
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	ev, err := k.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindToken, ID: h.Value.(*ipam.TokenHash).Token})
	if err != nil {
		if errors.Is(err, ipam.ErrNotFound) {
			err = ipam.Refuse(ipam.ErrNotFound, "unknown token")
		}
		return nil, toStatus(ctx, k.s.logger, method, err)
	}
	tk := ev.Value.(*ipam.Token)
	if !tk.ExpireTime.IsZero() && time.Now().After(tk.ExpireTime) {
		return nil, toStatus(ctx, k.s.logger, method, ipam.Refuse(ipam.ErrNotFound, "token expired"))
	}
	return &ipamv1.VerifyTokenResponse{Token: tokenToProto(tk)}, nil
}

// WatchTokenRevocations streams the secret hashes of the tokens deleted
// from now on (an expired token needs no message: the gateway caches no
// answer past a token's expiry).
func (k *tokenService) WatchTokenRevocations(_ *ipamv1.WatchTokenRevocationsRequest, stream ipamv1.TokenService_WatchTokenRevocationsServer) error {
	const method = "WatchTokenRevocations"
	ctx := stream.Context()
	// A one-key read, for the current revision to watch from.
	page, err := k.s.r.List(ctx, ipam.KindTokenHash, "", "", 1, 0)
	if err != nil {
		return toStatus(ctx, k.s.logger, method, err)
	}
	if err := stream.Send(&ipamv1.WatchTokenRevocationsResponse{}); err != nil {
		return err
	}
	return k.s.streamWatch(ctx, method, ipam.KindTokenHash, "", page.Revision, func(events []ipam.Event, _ int64) error {
		msg := &ipamv1.WatchTokenRevocationsResponse{}
		for _, ev := range events {
			if ev.Deleted {
				msg.SecretSha256 = append(msg.SecretSha256, ev.Ref.ID)
			}
		}
		if len(msg.SecretSha256) == 0 {
			return nil
		}
		return stream.Send(msg)
	})
}
