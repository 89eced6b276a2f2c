package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func newAllocCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "alloc",
		Aliases: []string{"allocation", "allocations"},
		Short:   "Allocate, inspect, renew, release and watch allocations",
		Long: `Allocate, inspect, renew, release and watch allocations: the addresses
held by one owner, one per address family.

An allocation is named "tenants/TENANT/allocations/ID". Commands that take
an allocation accept its name, or its OWNER together with --tenant.`,
		Example: `  beaconctl alloc allocate default/web --tenant acme
  beaconctl alloc list --tenant acme
  beaconctl alloc get default/web --tenant acme
  beaconctl alloc update default/web --tenant acme --traffic-policy local --endpoint-node node-1
  beaconctl alloc release default/web --tenant acme --hold 5m
  beaconctl alloc watch`,
	}
	cmd.AddCommand(
		newAllocAllocateCommand(g),
		newAllocGetCommand(g),
		newAllocListCommand(g),
		newAllocReleaseCommand(g),
		newAllocRenewCommand(g),
		newAllocUpdateCommand(g),
		newAllocWatchCommand(g),
	)
	return cmd
}

// allocKind is the allocation resource for the shared command shapes.
func allocKind() resourceKind[ipamv1.AllocationServiceClient, *ipamv1.Allocation] {
	return resourceKind[ipamv1.AllocationServiceClient, *ipamv1.Allocation]{
		client: ipamv1.NewAllocationServiceClient,
		name:   (*ipamv1.Allocation).GetName,
		table:  output.AllocationTable,
	}
}

type allocateFlags struct {
	tenant          string
	pool            string
	addresses       []string
	families        []string
	dualStack       string
	sharingKey      string
	globalGroup     string
	backup          bool
	count           int32
	ports           []string
	namespace       string
	labels          []string
	namespaceLabels []string
	ownerUID        string
	ttl             time.Duration
	requestID       string
}

// request builds the AllocateRequest for alloc allocate OWNER.
func (f *allocateFlags) request(cmd *cobra.Command, owner string) (*ipamv1.AllocateRequest, error) {
	if owner == "" {
		return nil, fmt.Errorf("the owner must not be empty")
	}
	if f.tenant == "" {
		return nil, fmt.Errorf("--tenant is required")
	}
	parent, err := tenantParent(f.tenant)
	if err != nil {
		return nil, err
	}
	if parent == "tenants/-" {
		return nil, fmt.Errorf("--tenant - (every tenant) cannot hold an allocation")
	}
	a := &ipamv1.Allocation{
		Owner:              owner,
		OwnerUid:           f.ownerUID,
		Namespace:          f.namespace,
		RequestedAddresses: f.addresses,
		SharingKey:         f.sharingKey,
		AddressCount:       f.count,
	}
	if f.pool != "" {
		if a.RequestedPool, err = poolName(f.pool); err != nil {
			return nil, err
		}
	}
	if f.globalGroup != "" {
		if a.GlobalGroup, err = groupName(f.globalGroup); err != nil {
			return nil, err
		}
		a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
		if f.backup {
			a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
		}
	} else if f.backup {
		return nil, fmt.Errorf("--backup needs --global-group")
	}
	for _, s := range f.families {
		fam, err := parseFamily(s)
		if err != nil {
			return nil, err
		}
		a.IpFamilies = append(a.IpFamilies, fam)
	}
	if f.dualStack != "" {
		if a.IpFamilyPolicy, err = parseDualStack(f.dualStack); err != nil {
			return nil, err
		}
	}
	for _, s := range f.ports {
		p, err := parsePort(s)
		if err != nil {
			return nil, err
		}
		a.Ports = append(a.Ports, p)
	}
	if a.OwnerLabels, err = parseLabels("label", f.labels); err != nil {
		return nil, err
	}
	if a.NamespaceLabels, err = parseLabels("namespace-label", f.namespaceLabels); err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("ttl") {
		a.Ttl = durationpb.New(f.ttl)
	}
	return &ipamv1.AllocateRequest{Parent: parent, Allocation: a, RequestId: f.requestID}, nil
}

func newAllocAllocateCommand(g *globals) *cobra.Command {
	f := &allocateFlags{}
	cmd := &cobra.Command{
		Use:     "allocate OWNER --tenant TENANT [flags]",
		Aliases: []string{"create"},
		Short:   "Give an owner its addresses",
		Long: `Give OWNER (a Service "namespace/name", a machine's ID; unique within the
tenant) its addresses in TENANT.

Allocate is idempotent per owner: an owner that already holds an allocation
satisfying the request gets it back unchanged, and an owner returning within
the hold period of its release gets its old addresses back.

Without --pool the server picks a pool: pools with a matching policy by
priority, then other auto-assign pools. --family asks for address families,
the first being the primary; with two families, --dual-stack require gets
one address of each or nothing, and --dual-stack prefer gets one of each if
the pool can. Owners with the same --sharing-key share an address when their
--port lists do not clash. With --ttl the allocation frees itself unless it
is renewed in time (alloc renew). --count N asks for N addresses per family
(2 to 16), each answered for over L2 by a distinct node (active-active L2).`,
		Example: `  # One address from any auto-assign pool.
  beaconctl alloc allocate default/web --tenant acme

  # A dual-stack allocation from pool web, sharing its IPv4 address.
  beaconctl alloc allocate default/dns-udp --tenant acme --pool web \
      --family ipv4 --family ipv6 --dual-stack require \
      --sharing-key dns --port 53/udp

  # Three addresses, announced over L2 by three distinct nodes.
  beaconctl alloc allocate default/web --tenant acme --count 3

  # A specific address that frees itself unless renewed within an hour.
  beaconctl alloc create machine-42 --tenant lab --address 192.0.2.42 --ttl 1h`,
		Args: exactArgs("OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request(cmd, args[0])
			if err != nil {
				return err
			}
			resp, err := callOnce(cmd.Context(), g, ipamv1.NewAllocationServiceClient, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.AllocateResponse, error) {
				return c.Allocate(ctx, req)
			})
			if err != nil {
				return err
			}
			if !resp.GetCreated() && g.output == output.Table {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s already held an allocation satisfying the request; returned unchanged\n", args[0])
			}
			return allocKind().print(g, cmd.OutOrStdout(), resp.GetAllocation())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.tenant, "tenant", "", "`TENANT` of the allocation (required)")
	fs.StringVar(&f.pool, "pool", "", "draw from this `POOL`, even one with auto-assign off")
	fs.StringSliceVar(&f.addresses, "address", nil, "specific `ADDRESS` wanted, at most one per family (repeatable)")
	fs.StringSliceVar(&f.families, "family", nil, "address `FAMILY` wanted, ipv4 or ipv6, the first being the primary (repeatable)")
	fs.StringVar(&f.dualStack, "dual-stack", "", "dual-stack `POLICY`: require (one IPv4 and one IPv6 address, or nothing) or prefer (both if the pool can)")
	fs.StringVar(&f.sharingKey, "sharing-key", "", "share an address with owners that have the same `KEY` and other ports")
	fs.StringVar(&f.globalGroup, "global-group", "", "join the global group `POOL/GROUP`: share its address with the other tenants' members")
	fs.BoolVar(&f.backup, "backup", false, "with --global-group: a backup member, announced less preferred (active/standby)")
	fs.Int32Var(&f.count, "count", 0, "`N` addresses per family (2 to 16), each answered for over L2 by a distinct node; not with --address, --sharing-key or --global-group")
	fs.StringSliceVar(&f.ports, "port", nil, "`PORT[/PROTO]` the owner serves, for sharing; PROTO is tcp (default), udp or sctp (repeatable)")
	fs.StringVar(&f.namespace, "namespace", "", "the owner's `NAMESPACE`, for pools whose policy names namespaces")
	fs.StringArrayVar(&f.labels, "label", nil, "owner label `KEY=VALUE`, for pools whose policy selects owners (repeatable)")
	fs.StringArrayVar(&f.namespaceLabels, "namespace-label", nil, "label `KEY=VALUE` of the owner's namespace, for namespace selectors (repeatable)")
	fs.StringVar(&f.ownerUID, "owner-uid", "", "the owner's own unique `UID`, recorded for the caller")
	fs.DurationVar(&f.ttl, "ttl", 0, "free the allocation this `DURATION` (10s to 365 days; e.g. 90m, 24h) after it is made or last renewed")
	fs.StringVar(&f.requestID, "request-id", "", "`ID` that makes retries safe: a repeat within a day returns the first result")
	return cmd
}

func newAllocGetCommand(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get (NAME | OWNER --tenant TENANT)",
		Short: "Show an allocation",
		Long: `Show an allocation, named by its name "tenants/TENANT/allocations/ID" or by
its OWNER with --tenant. ANNOUNCED-BY lists the nodes that announce its
addresses, each with its protocol: NODE(L2) or NODE(BGP). Conditions follow
the table, a line each: "Conflict: ..." when another host on the segment uses
one of its L2 addresses (naming its MAC, the node and interface that saw it).`,
		Example: `  beaconctl alloc get tenants/acme/allocations/a1b2c3d4e5f60718293a4
  beaconctl alloc get default/web --tenant acme -o json`,
		Args: exactArgs("NAME or OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseAllocationRef(args[0], tenant)
			if err != nil {
				return err
			}
			detail := allocKind()
			detail.table = output.AllocationDetailTable
			return detail.one(cmd, g, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.Allocation, error) {
				resp, err := c.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: ref.Name})
				return resp.GetAllocation(), err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the `TENANT`, to name the allocation by its OWNER")
	return cmd
}

func newAllocListCommand(g *globals) *cobra.Command {
	var (
		tenant string
		filter string
		held   bool
		pages  pageFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List allocations",
		Long: `List allocations in name order, of one tenant or of every tenant.

--filter is a conjunction of terms joined by AND, each FIELD = "VALUE" with
FIELD one of pool, owner, namespace, address, sharing_key, global_group or labels.KEY, or
labels.KEY:* (has the label).

--held lists the holds instead: addresses kept for released owners (a
deleted Service) until the hold ends, so that the owner gets them back. End
one now with "beaconctl alloc release OWNER --tenant TENANT".`,
		Example: `  beaconctl alloc list
  beaconctl alloc list --tenant acme --filter 'pool = "pools/web"'
  beaconctl alloc list --filter 'address = "192.0.2.7"' -o json
  beaconctl alloc list --held --tenant acme`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			parent, err := tenantParent(tenant)
			if err != nil {
				return err
			}
			kind := allocKind()
			if held {
				kind.table = output.HoldTable
			}
			return kind.list(cmd, g, &pages, func(ctx context.Context, c ipamv1.AllocationServiceClient, token string) ([]*ipamv1.Allocation, string, error) {
				resp, err := c.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{
					Parent:    parent,
					PageSize:  pages.size,
					PageToken: token,
					Filter:    filter,
					Held:      held,
				})
				return resp.GetAllocations(), resp.GetNextPageToken(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "-", "`TENANT` whose allocations to list; \"-\" for every tenant")
	fs.StringVar(&filter, "filter", "", "only allocations matching this `FILTER` (see above)")
	fs.BoolVar(&held, "held", false, "list the holds of released owners instead, with when each ends")
	pages.register(fs, "allocations")
	return cmd
}

func newAllocReleaseCommand(g *globals) *cobra.Command {
	var (
		tenant    string
		hold      time.Duration
		etag      string
		requestID string
	)
	cmd := &cobra.Command{
		Use:   "release (NAME | OWNER --tenant TENANT)",
		Short: "Free an allocation's addresses",
		Long: `Free an allocation's addresses, named by its name
"tenants/TENANT/allocations/ID" or by its OWNER with --tenant.

--hold keeps the addresses for the owner that long, so that it gets them back
if it allocates again meanwhile; --hold 0 frees them now. Without --hold the
server's default applies.

Releasing an owner that was released already and whose addresses are held
for it (see "alloc list --held") ends the hold now: the addresses are free.`,
		Example: `  beaconctl alloc release default/web --tenant acme
  beaconctl alloc release tenants/acme/allocations/a1b2c3d4e5f60718293a4 --hold 5m
  beaconctl alloc release default/web --tenant acme --hold 0 --etag "$ETAG"`,
		Args: exactArgs("NAME or OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseAllocationRef(args[0], tenant)
			if err != nil {
				return err
			}
			if hold < 0 {
				return fmt.Errorf("--hold must not be negative")
			}
			req := &ipamv1.ReleaseRequest{Etag: etag, RequestId: requestID}
			if ref.Owner != "" {
				req.Parent, req.Owner = ref.Parent, ref.Owner
			} else {
				req.Name = ref.Name
			}
			if cmd.Flags().Changed("hold") {
				req.Hold = durationpb.New(hold)
			}
			resp, err := callOnce(cmd.Context(), g, ipamv1.NewAllocationServiceClient, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.ReleaseResponse, error) {
				return c.Release(ctx, req)
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch g.output {
			case output.JSON:
				return output.WriteJSON(w, resp)
			case output.Name:
				return output.WriteNames(w, ref.Name)
			}
			addrs := strings.Join(resp.GetAddresses(), ", ")
			if addrs == "" {
				addrs = "no addresses"
			}
			if t := resp.GetHoldExpireTime(); t != nil {
				_, err = fmt.Fprintf(w, "released %s: %s, held for the owner until %s\n", ref.Name, addrs, output.Timestamp(t))
			} else {
				_, err = fmt.Fprintf(w, "released %s: %s\n", ref.Name, addrs)
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "", "the `TENANT`, to name the allocation by its OWNER")
	fs.DurationVar(&hold, "hold", 0, "keep the addresses for the owner this `DURATION` (0: free now; unset: the server's default)")
	fs.StringVar(&etag, "etag", "", "fail with Aborted unless the allocation still has this `ETAG`")
	fs.StringVar(&requestID, "request-id", "", "`ID` that makes retries safe")
	return cmd
}

func newAllocRenewCommand(g *globals) *cobra.Command {
	var (
		tenant string
		ttl    time.Duration
		etag   string
	)
	cmd := &cobra.Command{
		Use:   "renew (NAME | OWNER --tenant TENANT)",
		Short: "Push back the expiry of an allocation that has a TTL",
		Long: `Push back the expiry of an allocation that has a TTL, to --ttl from now,
or to its own TTL from now without --ttl.`,
		Example: `  beaconctl alloc renew machine-42 --tenant lab
  beaconctl alloc renew tenants/lab/allocations/a1b2c3d4e5f60718293a4 --ttl 2h`,
		Args: exactArgs("NAME or OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseAllocationRef(args[0], tenant)
			if err != nil {
				return err
			}
			req := &ipamv1.RenewAllocationRequest{Name: ref.Name, Etag: etag}
			if cmd.Flags().Changed("ttl") {
				req.Ttl = durationpb.New(ttl)
			}
			return allocKind().one(cmd, g, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.Allocation, error) {
				resp, err := c.RenewAllocation(ctx, req)
				return resp.GetAllocation(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "", "the `TENANT`, to name the allocation by its OWNER")
	fs.DurationVar(&ttl, "ttl", 0, "new TTL `DURATION` from now (default: the allocation's own TTL)")
	fs.StringVar(&etag, "etag", "", "fail with Aborted unless the allocation still has this `ETAG`")
	return cmd
}

func newAllocWatchCommand(g *globals) *cobra.Command {
	var (
		tenant string
		resume string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print allocation changes as they happen",
		Long: `Print the allocations, then every change as it happens, until Ctrl-C.

Each event is one line: TYPE NAME OWNER ADDRESSES POOL, where TYPE is
EXISTING (part of the starting snapshot), PUT (made or changed) or DELETED
(released or expired). With -o json each event is one AllocationEvent as
JSON on a line of its own; with -o name, the allocation's name.

When the watch stops, the token to resume after the last event is printed
on stderr; --resume TOKEN continues from there without a snapshot. A token
too old to resume from fails with OutOfRange: list again and watch without
--resume. --timeout does not apply to the watch.`,
		Example: `  beaconctl alloc watch
  beaconctl alloc watch --tenant acme -o json | jq .allocation.addresses
  beaconctl alloc watch --tenant acme --resume "$TOKEN"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			parent, err := tenantParent(tenant)
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer func() { _ = conn.Close() }()
			ctx := cmd.Context()
			stream, err := ipamv1.NewAllocationServiceClient(conn).WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{
				Parent:      parent,
				ResumeToken: resume,
			})
			if err != nil {
				return err
			}
			last := resume
			hint := func() {
				if last != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "watch stopped; resume with --resume %s\n", last)
				}
			}
			w := cmd.OutOrStdout()
			for {
				resp, err := stream.Recv()
				switch {
				case errors.Is(err, io.EOF):
					hint()
					return nil
				case err != nil && ctx.Err() != nil:
					hint() // Stopped by the user.
					return nil
				case status.Code(err) == codes.OutOfRange, status.Code(err) == codes.InvalidArgument:
					return err // The token (or the request) cannot be resumed from.
				case err != nil:
					hint()
					return err
				}
				for _, ev := range resp.GetEvents() {
					if err := printWatchEvent(g, w, ev); err != nil {
						return err
					}
				}
				if t := resp.GetResumeToken(); t != "" {
					last = t
				}
			}
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "-", "`TENANT` whose allocations to watch; \"-\" for every tenant")
	fs.StringVar(&resume, "resume", "", "resume after this `TOKEN` from an earlier watch instead of starting with a snapshot")
	return cmd
}

func printWatchEvent(g *globals, w io.Writer, ev *ipamv1.AllocationEvent) error {
	switch g.output {
	case output.JSON:
		return output.WriteJSONLine(w, ev)
	case output.Name:
		return output.WriteNames(w, ev.GetAllocation().GetName())
	default:
		return output.WatchEventLine(w, ev)
	}
}
