package robustness

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// reclaimSlack is how late after its TTL an allocation may still be seen.
const reclaimSlack = time.Second

// audit reads the final state through every replica once the load is
// over: no address held by two owners that may not share it, every
// replica agreeing, and every allocation whose TTL ran out reclaimed
// within reclaimSlack.
func audit(ctx context.Context, cfg Config, pools []Pool, conns []grpc.ClientConnInterface, rec *Recorder, rep *Report) {
	owners := map[string]*Owner{}
	for pi := range pools {
		for oi := range pools[pi].Owners {
			o := &pools[pi].Owners[oi]
			owners[o.Name] = o
		}
	}
	var first map[string]string
	var expiring []*ipamv1.Allocation
	for r, conn := range conns {
		all, err := listAll(ctx, conn)
		if err != nil {
			rep.Violations = append(rep.Violations, fmt.Sprintf("audit: replica %d cannot list allocations: %v", r, err))
			continue
		}
		seen := map[string]string{}
		byAddr := map[netip.Addr][]string{}
		for _, a := range all {
			o := owners[a.GetOwner()]
			if o == nil {
				rep.Violations = append(rep.Violations, fmt.Sprintf("audit: replica %d lists an allocation of unknown owner %q", r, a.GetOwner()))
				continue
			}
			seen[a.GetOwner()] = fmt.Sprint(a.GetAddresses())
			for _, addr := range parseAddrs(a.GetAddresses()) {
				for _, other := range byAddr[addr] {
					if !compatible(o, owners[other]) {
						rep.Violations = append(rep.Violations, fmt.Sprintf("audit: %s held by both %s and %s", addr, other, o.Name))
					}
				}
				byAddr[addr] = append(byAddr[addr], o.Name)
			}
			if r == 0 && a.GetExpireTime() != nil {
				expiring = append(expiring, a)
			}
		}
		if first == nil {
			first = seen
		} else if fmt.Sprint(first) != fmt.Sprint(seen) {
			rep.Violations = append(rep.Violations, fmt.Sprintf("audit: replica %d lists %v, replica 0 %v", r, seen, first))
		}
	}
	// Every allocation whose TTL runs out must be gone soon after.
	ac := ipamv1.NewAllocationServiceClient(conns[0])
	for _, a := range expiring {
		due := a.GetExpireTime().AsTime().Add(reclaimSlack)
		sleep(ctx, time.Until(due))
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		got, err := ac.GetAllocation(cctx, &ipamv1.GetAllocationRequest{Name: a.GetName()})
		cancel()
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			rep.Violations = append(rep.Violations, fmt.Sprintf("audit: reading %s after its TTL: %v", a.GetOwner(), err))
		case got.GetAllocation().GetUid() == a.GetUid():
			rep.Violations = append(rep.Violations, fmt.Sprintf("audit: %s still allocated %v after its TTL ran out at %s",
				a.GetOwner(), time.Since(a.GetExpireTime().AsTime()).Round(time.Millisecond), a.GetExpireTime().AsTime().Format(time.RFC3339Nano)))
		}
	}
}

func listAll(ctx context.Context, conn grpc.ClientConnInterface) ([]*ipamv1.Allocation, error) {
	ac := ipamv1.NewAllocationServiceClient(conn)
	var out []*ipamv1.Allocation
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := ac.ListAllocations(cctx, &ipamv1.ListAllocationsRequest{Parent: Parent, PageSize: 1000, PageToken: token})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetAllocations()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}
