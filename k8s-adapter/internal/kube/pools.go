package kube

import (
	"context"
	"fmt"

	"github.com/beaconlb/beacon/k8s-adapter/internal/metallb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/webhook"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// OtherPools lists, for the webhook, the pools an IPAddressPool
// namespace/name must not overlap: the other IPAddressPools in the
// adapter's cache, and the IPAM's pools that are not the tenant's imported
// ones (those are the IPAddressPools themselves).
func (c *Controller) OtherPools(ctx context.Context, namespace, name string) ([]webhook.Pool, error) {
	var out []webhook.Pool
	if c.metallb != nil {
		for _, u := range c.metallb.objects(KindIPAddressPool) {
			if u.GetNamespace() == namespace && u.GetName() == name {
				continue
			}
			spec, _ := u.Object["spec"].(map[string]any)
			var ranges []string
			if list, ok := spec["addresses"].([]any); ok {
				for _, a := range list {
					if s, ok := a.(string); ok {
						ranges = append(ranges, s)
					}
				}
			}
			out = append(out, webhook.Pool{Name: "IPAddressPool " + u.GetNamespace() + "/" + u.GetName(), Ranges: ranges})
		}
	}
	pools, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.Pool, string, error) {
		r, err := c.ipam.Pools.ListPools(ctx, &ipamv1.ListPoolsRequest{PageSize: 1000, PageToken: token})
		return r.GetPools(), r.GetNextPageToken(), err
	})
	if err != nil {
		return out, fmt.Errorf("list IPAM pools: %w", err)
	}
	for _, p := range pools {
		l := p.GetLabels()
		if l[metallb.LabelSource] == metallb.SourceValue && l[metallb.LabelTenant] == c.cfg.Tenant {
			continue
		}
		out = append(out, webhook.Pool{Name: "IPAM pool " + lastPart(p.GetName()), Ranges: p.GetRanges()})
	}
	return out, nil
}
