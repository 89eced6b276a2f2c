package cli

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func (f *fakeIPAM) CreateTenant(_ context.Context, req *ipamv1.CreateTenantRequest) (*ipamv1.CreateTenantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := "tenants/" + req.GetTenantId()
	if _, ok := f.tenants[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "tenant %s already exists", name)
	}
	t := proto.Clone(req.GetTenant()).(*ipamv1.Tenant)
	t.Name, t.Etag = name, "e1"
	f.tenants[name] = t
	return &ipamv1.CreateTenantResponse{Tenant: t}, nil
}

func (f *fakeIPAM) GetTenant(_ context.Context, req *ipamv1.GetTenantRequest) (*ipamv1.GetTenantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tenants[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "tenant %s not found", req.GetName())
	}
	return &ipamv1.GetTenantResponse{Tenant: t}, nil
}

func (f *fakeIPAM) ListTenants(_ context.Context, req *ipamv1.ListTenantsRequest) (*ipamv1.ListTenantsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*ipamv1.Tenant
	for _, name := range slices.Sorted(maps.Keys(f.tenants)) {
		all = append(all, f.tenants[name])
	}
	ts, next, err := page(all, req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListTenantsResponse{Tenants: ts, NextPageToken: next}, nil
}

func (f *fakeIPAM) UpdateTenant(_ context.Context, req *ipamv1.UpdateTenantRequest) (*ipamv1.UpdateTenantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := req.GetTenant()
	cur, ok := f.tenants[in.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "tenant %s not found", in.GetName())
	}
	if in.GetEtag() != "" && in.GetEtag() != cur.GetEtag() {
		return nil, status.Errorf(codes.Aborted, "etag mismatch")
	}
	t := proto.Clone(cur).(*ipamv1.Tenant)
	for _, p := range req.GetUpdateMask().GetPaths() {
		switch p {
		case "display_name":
			t.DisplayName = in.GetDisplayName()
		case "max_addresses":
			t.MaxAddresses = in.GetMaxAddresses()
		default:
			return nil, status.Errorf(codes.InvalidArgument, "bad update_mask path %q", p)
		}
	}
	t.Etag = cur.GetEtag() + "+"
	f.tenants[t.GetName()] = t
	return &ipamv1.UpdateTenantResponse{Tenant: t}, nil
}

func (f *fakeIPAM) DeleteTenant(_ context.Context, req *ipamv1.DeleteTenantRequest) (*ipamv1.DeleteTenantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.tenants[req.GetName()]; !ok {
		return nil, status.Errorf(codes.NotFound, "tenant %s not found", req.GetName())
	}
	delete(f.tenants, req.GetName())
	return &ipamv1.DeleteTenantResponse{}, nil
}

// fakeSecret is the secret the fake gives every token it creates.
const fakeSecret = "bct_fakesecret"

func (f *fakeIPAM) CreateToken(_ context.Context, req *ipamv1.CreateTokenRequest) (*ipamv1.CreateTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := "tokens/" + req.GetTokenId()
	if _, ok := f.tokens[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "token %s already exists", name)
	}
	t := proto.Clone(req.GetToken()).(*ipamv1.Token)
	t.Name = name
	f.tokens[name] = t
	return &ipamv1.CreateTokenResponse{Token: t, Secret: fakeSecret}, nil
}

func (f *fakeIPAM) GetToken(_ context.Context, req *ipamv1.GetTokenRequest) (*ipamv1.GetTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "token %s not found", req.GetName())
	}
	return &ipamv1.GetTokenResponse{Token: t}, nil
}

func (f *fakeIPAM) ListTokens(_ context.Context, req *ipamv1.ListTokensRequest) (*ipamv1.ListTokensResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*ipamv1.Token
	for _, name := range slices.Sorted(maps.Keys(f.tokens)) {
		all = append(all, f.tokens[name])
	}
	ts, next, err := page(all, req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListTokensResponse{Tokens: ts, NextPageToken: next}, nil
}

func (f *fakeIPAM) DeleteToken(_ context.Context, req *ipamv1.DeleteTokenRequest) (*ipamv1.DeleteTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.tokens[req.GetName()]; !ok {
		return nil, status.Errorf(codes.NotFound, "token %s not found", req.GetName())
	}
	delete(f.tokens, req.GetName())
	return &ipamv1.DeleteTokenResponse{}, nil
}
