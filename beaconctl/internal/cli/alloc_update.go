package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

type allocUpdateFlags struct {
	tenant          string
	labels          []string
	namespaceLabels []string
	ports           []string
	trafficPolicy   string
	endpointNodes   []string
	ttl             time.Duration
	etag            string
	requestID       string
}

// needsCurrent reports whether the update is computed from the allocation
// as it is, which must then be read first.
func (f *allocUpdateFlags) needsCurrent(cmd *cobra.Command) bool {
	fs := cmd.Flags()
	return fs.Changed("label") || fs.Changed("namespace-label")
}

// request builds the UpdateAllocationRequest for alloc update from the flags
// that were set. current is the allocation as read from the server; it is
// needed (non-nil) only when needsCurrent says so.
func (f *allocUpdateFlags) request(cmd *cobra.Command, name string, current *ipamv1.Allocation) (*ipamv1.UpdateAllocationRequest, error) {
	fs := cmd.Flags()
	a := &ipamv1.Allocation{Name: name, Etag: f.etag}
	var paths []string
	var err error
	if fs.Changed("label") {
		if a.OwnerLabels, err = applyLabelEdits("label", current.GetOwnerLabels(), f.labels); err != nil {
			return nil, err
		}
		paths = append(paths, "owner_labels")
	}
	if fs.Changed("namespace-label") {
		if a.NamespaceLabels, err = applyLabelEdits("namespace-label", current.GetNamespaceLabels(), f.namespaceLabels); err != nil {
			return nil, err
		}
		paths = append(paths, "namespace_labels")
	}
	if fs.Changed("port") {
		for _, s := range f.ports {
			p, err := parsePort(s)
			if err != nil {
				return nil, err
			}
			a.Ports = append(a.Ports, p)
		}
		paths = append(paths, "ports")
	}
	if fs.Changed("traffic-policy") {
		if a.TrafficPolicy, err = parseTrafficPolicy(f.trafficPolicy); err != nil {
			return nil, err
		}
		paths = append(paths, "traffic_policy")
	}
	if fs.Changed("endpoint-node") {
		a.EndpointNodes = f.endpointNodes
		paths = append(paths, "endpoint_nodes")
	}
	if fs.Changed("ttl") {
		if a.Ttl, err = optionalDuration("ttl", f.ttl); err != nil {
			return nil, err
		}
		paths = append(paths, "ttl")
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("nothing to update: set at least one of --label, --namespace-label, --port, --traffic-policy, --endpoint-node, --ttl")
	}
	// A change computed from the allocation as read must not overwrite a
	// change made since: send the etag read unless the user gave one.
	if a.Etag == "" && current != nil {
		a.Etag = current.GetEtag()
	}
	return &ipamv1.UpdateAllocationRequest{
		Allocation: a,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
		RequestId:  f.requestID,
	}, nil
}

func newAllocUpdateCommand(g *globals) *cobra.Command {
	f := &allocUpdateFlags{}
	cmd := &cobra.Command{
		Use:   "update (NAME | OWNER --tenant TENANT) [flags]",
		Short: "Change an allocation's labels, ports, traffic policy, endpoints or TTL",
		Long: `Change the owner metadata and traffic fields of an allocation named by the
flags that are set; its addresses stay. The allocation is named by its name
"tenants/TENANT/allocations/ID" or by its OWNER with --tenant.

--label and --namespace-label edit the current labels (KEY=VALUE sets a
label, KEY- removes it): the allocation is read first, and the change is
sent with the etag read, so that it fails with Aborted instead of
overwriting a change made meanwhile. Run it again in that case.

--port and --endpoint-node replace the whole list; give an empty value
(--endpoint-node "") to clear it. --traffic-policy local sends traffic only
to the --endpoint-node nodes (the nodes with ready endpoints), as a
Service's externalTrafficPolicy: Local. --ttl sets a new TTL, counted from
the last allocation or renewal; --ttl 0 removes it, so that the allocation
no longer expires.`,
		Example: `  # Only the nodes with endpoints receive traffic.
  beaconctl alloc update default/web --tenant acme --traffic-policy local \
      --endpoint-node node-1 --endpoint-node node-2

  # Relabel, and serve DNS on both protocols.
  beaconctl alloc update default/dns --tenant acme --label tier=edge --label legacy- \
      --port 53/udp --port 53/tcp

  # Make a machine's allocation permanent.
  beaconctl alloc update machine-42 --tenant lab --ttl 0`,
		Args: exactArgs("NAME or OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseAllocationRef(args[0], f.tenant)
			if err != nil {
				return err
			}
			// Fail on a bad flag before reading anything.
			if _, err := f.request(cmd, ref.Name, &ipamv1.Allocation{}); err != nil {
				return err
			}
			var current *ipamv1.Allocation
			if f.needsCurrent(cmd) {
				resp, err := callOnce(cmd.Context(), g, ipamv1.NewAllocationServiceClient, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.GetAllocationResponse, error) {
					return c.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: ref.Name})
				})
				if err != nil {
					return err
				}
				current = resp.GetAllocation()
			}
			req, err := f.request(cmd, ref.Name, current)
			if err != nil {
				return err
			}
			return allocKind().one(cmd, g, func(ctx context.Context, c ipamv1.AllocationServiceClient) (*ipamv1.Allocation, error) {
				resp, err := c.UpdateAllocation(ctx, req)
				return resp.GetAllocation(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.tenant, "tenant", "", "the `TENANT`, to name the allocation by its OWNER")
	fs.StringArrayVar(&f.labels, "label", nil, "owner label `KEY=VALUE` to set, KEY- to remove one (repeatable)")
	fs.StringArrayVar(&f.namespaceLabels, "namespace-label", nil, "namespace label `KEY=VALUE` to set, KEY- to remove one (repeatable)")
	fs.StringSliceVar(&f.ports, "port", nil, "replace the ports with `PORT[/PROTO]`s, PROTO tcp (default), udp or sctp (repeatable; \"\" for none)")
	fs.StringVar(&f.trafficPolicy, "traffic-policy", "", "`POLICY`: cluster (any node may receive traffic) or local (only the endpoint nodes)")
	fs.StringSliceVar(&f.endpointNodes, "endpoint-node", nil, "replace the nodes with ready endpoints with `NODE`s, for --traffic-policy local (repeatable; \"\" for none)")
	fs.DurationVar(&f.ttl, "ttl", 0, "new TTL `DURATION` (10s to 365 days); 0 removes the TTL")
	fs.StringVar(&f.etag, "etag", "", "fail with Aborted unless the allocation still has this `ETAG`")
	fs.StringVar(&f.requestID, "request-id", "", "`ID` that makes retries safe")
	return cmd
}
