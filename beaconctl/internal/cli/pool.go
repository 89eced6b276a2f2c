package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func newPoolCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Aliases: []string{"pools"},
		Short:   "Manage pools, the address ranges that allocations draw from",
		Long: `Manage pools, the address ranges that allocations draw from.

A pool is named "pools/NAME"; NAME is 1-63 lower-case letters, digits and
'-', starting with a letter, and may be given without the "pools/" prefix.`,
		Example: `  beaconctl pool create web --range 192.0.2.0/24 --range 2001:db8::/64
  beaconctl pool list
  beaconctl pool get web -o json
  beaconctl pool update web --add-range 198.51.100.10-198.51.100.20
  beaconctl pool delete web`,
	}
	cmd.AddCommand(
		newPoolCreateCommand(g),
		newPoolGetCommand(g),
		newPoolListCommand(g),
		newPoolUpdateCommand(g),
		newPoolDeleteCommand(g),
	)
	return cmd
}

// poolKind is the pool resource for the shared command shapes.
func poolKind() resourceKind[ipamv1.PoolServiceClient, *ipamv1.Pool] {
	return resourceKind[ipamv1.PoolServiceClient, *ipamv1.Pool]{
		client: ipamv1.NewPoolServiceClient,
		name:   (*ipamv1.Pool).GetName,
		table:  output.PoolTable,
	}
}

type poolCreateFlags struct {
	ranges       []string
	exclusions   []string
	noAutoAssign bool
	avoidBuggy   bool
	tenants      []string
	priority     int32
	namespaces   []string
	labels       []string
	description  string
	requestID    string
	validateOnly bool
}

// request builds the CreatePoolRequest for pool create NAME.
func (f *poolCreateFlags) request(name string) (*ipamv1.CreatePoolRequest, error) {
	id, err := poolID(name)
	if err != nil {
		return nil, err
	}
	if len(f.ranges) == 0 {
		return nil, fmt.Errorf("a pool needs at least one --range")
	}
	if f.priority < 0 {
		return nil, fmt.Errorf("--priority must be 1 (highest) or more, or 0 for none")
	}
	labels, err := parseLabels("label", f.labels)
	if err != nil {
		return nil, err
	}
	pool := &ipamv1.Pool{
		Description:   f.description,
		Ranges:        f.ranges,
		Exclusions:    f.exclusions,
		AvoidBuggyIps: f.avoidBuggy,
		Tenants:       f.tenants,
		Labels:        labels,
	}
	if f.noAutoAssign {
		pool.AutoAssign = proto.Bool(false)
	}
	if f.priority != 0 || len(f.namespaces) > 0 {
		pool.AllocationPolicy = &ipamv1.AllocationPolicy{
			Priority:   f.priority,
			Namespaces: f.namespaces,
		}
	}
	return &ipamv1.CreatePoolRequest{
		PoolId:       id,
		Pool:         pool,
		RequestId:    f.requestID,
		ValidateOnly: f.validateOnly,
	}, nil
}

func newPoolCreateCommand(g *globals) *cobra.Command {
	f := &poolCreateFlags{}
	cmd := &cobra.Command{
		Use:   "create NAME --range CIDR_OR_RANGE [flags]",
		Short: "Create a pool",
		Long: `Create a pool named NAME (or pools/NAME) with the given addresses.

Ranges are CIDRs ("192.0.2.0/24", "2001:db8::/64") or inclusive ranges
("198.51.100.10-198.51.100.20"), IPv4 and IPv6 mixed. Exclusions take the
same forms, or single addresses. Pools whose addresses overlap another
pool's are refused.

A pool is used for allocations that do not name it unless --no-auto-assign
is set. --priority and --namespace restrict the pool to matching owners and
order it among pools (1 is the highest priority), as MetalLB's
serviceAllocation does.`,
		Example: `  # A dual-stack pool.
  beaconctl pool create web --range 192.0.2.0/24 --range 2001:db8::/64

  # A pool only used when asked for by name, without .0 and .255 addresses.
  beaconctl pool create reserved --range 198.51.100.0/24 --exclude 198.51.100.1 \
      --no-auto-assign --avoid-buggy-ips

  # A pool for tenant acme's namespace prod, tried first.
  beaconctl pool create prod --range 203.0.113.0/25 --tenant acme \
      --namespace prod --priority 1 --label env=prod --description "prod services"`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request(args[0])
			if err != nil {
				return err
			}
			return poolKind().one(cmd, g, func(ctx context.Context, c ipamv1.PoolServiceClient) (*ipamv1.Pool, error) {
				resp, err := c.CreatePool(ctx, req)
				return resp.GetPool(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&f.ranges, "range", nil, "`CIDR_OR_RANGE` of the pool: a CIDR or an inclusive range FIRST-LAST (repeatable or comma-separated; required)")
	fs.StringSliceVar(&f.exclusions, "exclude", nil, "`CIDR_OR_RANGE` or address inside the ranges never to hand out (repeatable)")
	fs.BoolVar(&f.noAutoAssign, "no-auto-assign", false, "use the pool only for allocations that name it with --pool")
	fs.BoolVar(&f.avoidBuggy, "avoid-buggy-ips", false, "skip IPv4 addresses ending in .0 or .255")
	fs.StringSliceVar(&f.tenants, "tenant", nil, "`TENANT` that may draw from the pool (repeatable; default: every tenant)")
	fs.Int32Var(&f.priority, "priority", 0, "priority `N` among pools, 1 is the highest (default: after every pool with a priority)")
	fs.StringSliceVar(&f.namespaces, "namespace", nil, "owner `NAMESPACE` the pool serves (repeatable; default: any)")
	fs.StringArrayVar(&f.labels, "label", nil, "label `KEY=VALUE` of the pool (repeatable)")
	fs.StringVar(&f.description, "description", "", "free `TEXT` for people")
	fs.StringVar(&f.requestID, "request-id", "", "`ID` that makes retries safe: a repeat within a day returns the first result")
	fs.BoolVar(&f.validateOnly, "validate-only", false, "check the request without creating the pool")
	return cmd
}

func newPoolGetCommand(g *globals) *cobra.Command {
	return poolKind().getCommand(g, &cobra.Command{
		Use:   "get NAME",
		Short: "Show a pool and its usage",
		Example: `  beaconctl pool get web
  beaconctl pool get pools/web -o json`,
	}, "NAME", poolName, func(ctx context.Context, c ipamv1.PoolServiceClient, name string) (*ipamv1.Pool, error) {
		resp, err := c.GetPool(ctx, &ipamv1.GetPoolRequest{Name: name})
		return resp.GetPool(), err
	})
}

func newPoolListCommand(g *globals) *cobra.Command {
	var filter string
	var pages pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List pools with their usage",
		Long: `List pools in name order with their usage per address family.

--filter is a conjunction of terms joined by AND:
  labels.KEY = "VALUE"   the pool has the label with this value
  labels.KEY:*           the pool has the label
  tenant = "T"           tenant T may draw from the pool`,
		Example: `  beaconctl pool list
  beaconctl pool list --filter 'labels.env = "prod" AND tenant = "acme"'
  beaconctl pool list -o name`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return poolKind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.PoolServiceClient, token string) ([]*ipamv1.Pool, string, error) {
				resp, err := c.ListPools(ctx, &ipamv1.ListPoolsRequest{
					PageSize:  pages.size,
					PageToken: token,
					Filter:    filter,
				})
				return resp.GetPools(), resp.GetNextPageToken(), err
			})
		},
	}
	cmd.Flags().StringVar(&filter, "filter", "", "only pools matching this `FILTER` (see above)")
	pages.register(cmd.Flags(), "pools")
	return cmd
}

type poolUpdateFlags struct {
	addRanges    []string
	removeRanges []string
	exclusions   []string
	labels       []string
	autoAssign   bool
	avoidBuggy   bool
	tenants      []string
	description  string
	etag         string
	requestID    string
	validateOnly bool
}

// needsCurrent reports whether the update is computed from the pool as it
// is, which must then be read first.
func (f *poolUpdateFlags) needsCurrent(cmd *cobra.Command) bool {
	fs := cmd.Flags()
	return fs.Changed("add-range") || fs.Changed("remove-range") || fs.Changed("label")
}

// request builds the UpdatePoolRequest for pool update NAME from the flags
// that were set. current is the pool as read from the server; it is needed
// (non-nil) only when needsCurrent says so.
func (f *poolUpdateFlags) request(cmd *cobra.Command, name string, current *ipamv1.Pool) (*ipamv1.UpdatePoolRequest, error) {
	fs := cmd.Flags()
	pool := &ipamv1.Pool{Name: name, Etag: f.etag}
	var paths []string
	if fs.Changed("description") {
		pool.Description = f.description
		paths = append(paths, "description")
	}
	if fs.Changed("add-range") || fs.Changed("remove-range") {
		ranges, err := editRanges(current.GetRanges(), f.addRanges, f.removeRanges)
		if err != nil {
			return nil, err
		}
		pool.Ranges = ranges
		paths = append(paths, "ranges")
	}
	if fs.Changed("set-exclusions") {
		pool.Exclusions = f.exclusions
		paths = append(paths, "exclusions")
	}
	if fs.Changed("auto-assign") {
		pool.AutoAssign = proto.Bool(f.autoAssign)
		paths = append(paths, "auto_assign")
	}
	if fs.Changed("avoid-buggy-ips") {
		pool.AvoidBuggyIps = f.avoidBuggy
		paths = append(paths, "avoid_buggy_ips")
	}
	if fs.Changed("set-tenants") {
		pool.Tenants = f.tenants
		paths = append(paths, "tenants")
	}
	if fs.Changed("label") {
		labels, err := applyLabelEdits("label", current.GetLabels(), f.labels)
		if err != nil {
			return nil, err
		}
		pool.Labels = labels
		paths = append(paths, "labels")
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("nothing to update: set at least one of --add-range, --remove-range, --set-exclusions, --label, --auto-assign, --avoid-buggy-ips, --set-tenants, --description")
	}
	// A change computed from the pool as read must not overwrite a change
	// made since: send the etag read unless the user gave one.
	if pool.Etag == "" && current != nil {
		pool.Etag = current.GetEtag()
	}
	return &ipamv1.UpdatePoolRequest{
		Pool:         pool,
		UpdateMask:   &fieldmaskpb.FieldMask{Paths: paths},
		RequestId:    f.requestID,
		ValidateOnly: f.validateOnly,
	}, nil
}

func newPoolUpdateCommand(g *globals) *cobra.Command {
	f := &poolUpdateFlags{}
	cmd := &cobra.Command{
		Use:   "update NAME [flags]",
		Short: "Change a pool",
		Long: `Change the fields of a pool named by the flags that are set; other fields
are left as they are.

--add-range and --remove-range edit the pool's current ranges, and --label
edits its current labels (KEY=VALUE sets a label, KEY- removes it): the pool
is read first, and the change is sent with the etag read, so that it fails
with Aborted instead of overwriting a change made meanwhile. Run it again in
that case. --etag makes any update conditional on the pool being unchanged
since that etag.

--set-exclusions and --set-tenants replace the whole list; give an empty
value (--set-exclusions "") to clear it.

Removing a range that holds allocations is refused.`,
		Example: `  beaconctl pool update web --add-range 198.51.100.0/24
  beaconctl pool update web --remove-range 192.0.2.0/24 --add-range 192.0.2.0/25
  beaconctl pool update web --set-exclusions 192.0.2.1,192.0.2.254
  beaconctl pool update web --label env=prod --label team-
  beaconctl pool update web --auto-assign=false --etag "$ETAG"`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := poolName(args[0])
			if err != nil {
				return err
			}
			// Fail on a bad flag before reading anything.
			if f.needsCurrent(cmd) {
				if _, err := applyLabelEdits("label", nil, f.labels); err != nil {
					return err
				}
			} else if _, err := f.request(cmd, name, nil); err != nil {
				return err
			}
			var current *ipamv1.Pool
			if f.needsCurrent(cmd) {
				resp, err := callOnce(cmd.Context(), g, ipamv1.NewPoolServiceClient, func(ctx context.Context, c ipamv1.PoolServiceClient) (*ipamv1.GetPoolResponse, error) {
					return c.GetPool(ctx, &ipamv1.GetPoolRequest{Name: name})
				})
				if err != nil {
					return err
				}
				current = resp.GetPool()
			}
			req, err := f.request(cmd, name, current)
			if err != nil {
				return err
			}
			return poolKind().one(cmd, g, func(ctx context.Context, c ipamv1.PoolServiceClient) (*ipamv1.Pool, error) {
				resp, err := c.UpdatePool(ctx, req)
				return resp.GetPool(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&f.addRanges, "add-range", nil, "`CIDR_OR_RANGE` to add (repeatable)")
	fs.StringSliceVar(&f.removeRanges, "remove-range", nil, "`CIDR_OR_RANGE` to remove, as the pool lists it (repeatable)")
	fs.StringSliceVar(&f.exclusions, "set-exclusions", nil, "replace the exclusions with these `CIDRS_OR_RANGES` or addresses (comma-separated or repeated; \"\" clears)")
	fs.StringArrayVar(&f.labels, "label", nil, "`KEY=VALUE` to set a label, KEY- to remove one (repeatable)")
	fs.BoolVar(&f.autoAssign, "auto-assign", false, "whether allocations that do not name the pool may use it (--auto-assign=false to turn off)")
	fs.BoolVar(&f.avoidBuggy, "avoid-buggy-ips", false, "whether to skip IPv4 addresses ending in .0 or .255 (--avoid-buggy-ips=false to turn off)")
	fs.StringSliceVar(&f.tenants, "set-tenants", nil, "replace the `TENANTS` that may draw from the pool (\"\" for every tenant)")
	fs.StringVar(&f.description, "description", "", "new description `TEXT`")
	fs.StringVar(&f.etag, "etag", "", "fail with Aborted unless the pool still has this `ETAG`")
	fs.StringVar(&f.requestID, "request-id", "", "`ID` that makes retries safe")
	fs.BoolVar(&f.validateOnly, "validate-only", false, "check the request without changing the pool")
	return cmd
}

func newPoolDeleteCommand(g *globals) *cobra.Command {
	var (
		force     bool
		etag      string
		requestID string
	)
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a pool",
		Long: `Delete a pool. A pool that holds allocations is refused unless --force
is set, which releases its allocations first.`,
		Example: `  beaconctl pool delete web
  beaconctl pool delete web --force --etag "$ETAG"`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := poolName(args[0])
			if err != nil {
				return err
			}
			resp, err := callOnce(cmd.Context(), g, ipamv1.NewPoolServiceClient, func(ctx context.Context, c ipamv1.PoolServiceClient) (*ipamv1.DeletePoolResponse, error) {
				return c.DeletePool(ctx, &ipamv1.DeletePoolRequest{
					Name:      name,
					Etag:      etag,
					Force:     force,
					RequestId: requestID,
				})
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch g.output {
			case output.JSON:
				return output.WriteJSON(w, resp)
			case output.Name:
				return output.WriteNames(w, name)
			}
			if n := resp.GetReleasedAllocations(); n > 0 {
				_, err = fmt.Fprintf(w, "deleted %s, released %d allocations\n", name, n)
				return err
			}
			_, err = fmt.Fprintf(w, "deleted %s\n", name)
			return err
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&force, "force", false, "release the pool's allocations instead of refusing")
	return etagFlags(cmd, "the pool", &etag, &requestID)
}
