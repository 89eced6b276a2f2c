package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// groupName turns "POOL/GROUP" or "pools/POOL/globalGroups/GROUP" into the
// latter.
func groupName(s string) (string, error) {
	if rest, ok := strings.CutPrefix(s, "pools/"); ok {
		pool, group, ok := strings.Cut(rest, "/globalGroups/")
		if ok && pool != "" && group != "" && !strings.Contains(group, "/") {
			return s, nil
		}
		return "", fmt.Errorf("global group %q: want POOL/GROUP or pools/POOL/globalGroups/GROUP", s)
	}
	pool, group, ok := strings.Cut(s, "/")
	if !ok || pool == "" || group == "" || strings.Contains(group, "/") {
		return "", fmt.Errorf("global group %q: want POOL/GROUP or pools/POOL/globalGroups/GROUP", s)
	}
	return "pools/" + pool + "/globalGroups/" + group, nil
}

func tenantNames(vals []string) ([]string, error) {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		n, err := tenantName(v)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func newGroupCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "group",
		Aliases: []string{"groups", "global-group"},
		Short:   "Manage global groups: one address for a Service in several clusters",
		Long: `Manage global groups. A global group lives on a pool and is named
"pools/POOL/globalGroups/GROUP" (or POOL/GROUP here). Allocations of the
tenants it grants (--tenant) that name it share one address per family:
each cluster's nodes announce it over BGP, so routers see ECMP across
clusters, and a cluster whose Service has no ready endpoint withdraws it.
A Service joins with the beacon.io/global-group annotation; an allocation
with alloc allocate --global-group. The address is taken when the first
member joins and freed when the last leaves. Managing groups needs the
admin role; viewers may read them.`,
		Example: `  beaconctl group create anycast/web --tenant east --tenant west
  beaconctl group get anycast/web
  beaconctl group list --pool anycast
  beaconctl group update anycast/web --tenant east --tenant west --tenant north
  beaconctl group delete anycast/web`,
	}
	cmd.AddCommand(newGroupCreateCommand(g), newGroupGetCommand(g), newGroupListCommand(g), newGroupUpdateCommand(g), newGroupDeleteCommand(g))
	return cmd
}

// groupKind is the global group resource for the shared command shapes.
func groupKind() resourceKind[ipamv1.GlobalGroupServiceClient, *ipamv1.GlobalGroup] {
	return resourceKind[ipamv1.GlobalGroupServiceClient, *ipamv1.GlobalGroup]{
		client: ipamv1.NewGlobalGroupServiceClient,
		name:   (*ipamv1.GlobalGroup).GetName,
		table:  output.GroupTable,
	}
}

func newGroupCreateCommand(g *globals) *cobra.Command {
	var (
		tenants     []string
		description string
		requestID   string
	)
	cmd := &cobra.Command{
		Use:     "create POOL/GROUP [flags]",
		Short:   "Create a global group on a pool",
		Example: `  beaconctl group create anycast/web --tenant east --tenant west --description "shop frontend"`,
		Args:    exactArgs("POOL/GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := groupName(args[0])
			if err != nil {
				return err
			}
			ts, err := tenantNames(tenants)
			if err != nil {
				return err
			}
			parent, id, _ := strings.Cut(name, "/globalGroups/")
			return groupKind().one(cmd, g, func(ctx context.Context, c ipamv1.GlobalGroupServiceClient) (*ipamv1.GlobalGroup, error) {
				resp, err := c.CreateGlobalGroup(ctx, &ipamv1.CreateGlobalGroupRequest{
					Parent: parent, GlobalGroupId: id, RequestId: requestID,
					GlobalGroup: &ipamv1.GlobalGroup{Tenants: ts, Description: description},
				})
				return resp.GetGlobalGroup(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&tenants, "tenant", nil, "`TENANT` granted to join (repeat, or comma-separated)")
	fs.StringVar(&description, "description", "", "`TEXT` for people")
	fs.StringVar(&requestID, "request-id", "", "`ID` that makes retries safe")
	return cmd
}

func newGroupGetCommand(g *globals) *cobra.Command {
	return groupKind().getCommand(g, &cobra.Command{
		Use:     "get POOL/GROUP",
		Short:   "Show a global group with its addresses and members",
		Example: `  beaconctl group get anycast/web -o json`,
	}, "POOL/GROUP", groupName, func(ctx context.Context, c ipamv1.GlobalGroupServiceClient, name string) (*ipamv1.GlobalGroup, error) {
		resp, err := c.GetGlobalGroup(ctx, &ipamv1.GetGlobalGroupRequest{Name: name})
		return resp.GetGlobalGroup(), err
	})
}

func newGroupListCommand(g *globals) *cobra.Command {
	var (
		pages pageFlags
		pool  string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List global groups",
		Example: "  beaconctl group list\n  beaconctl group list --pool anycast",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			parent := "pools/-"
			if pool != "" {
				p, err := poolName(pool)
				if err != nil {
					return err
				}
				parent = p
			}
			return groupKind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.GlobalGroupServiceClient, token string) ([]*ipamv1.GlobalGroup, string, error) {
				resp, err := c.ListGlobalGroups(ctx, &ipamv1.ListGlobalGroupsRequest{Parent: parent, PageSize: pages.size, PageToken: token})
				return resp.GetGlobalGroups(), resp.GetNextPageToken(), err
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "only the groups of `POOL`")
	pages.register(cmd.Flags(), "groups")
	return cmd
}

func newGroupUpdateCommand(g *globals) *cobra.Command {
	var (
		tenants     []string
		description string
		etag        string
		requestID   string
	)
	cmd := &cobra.Command{
		Use:   "update POOL/GROUP [flags]",
		Short: "Change a global group's grants or description",
		Long: `Change the fields named by the flags that are set. --tenant replaces the
whole list of grants; a tenant left out can no longer join, and its member
stays until released.`,
		Example: `  beaconctl group update anycast/web --tenant east --tenant west --tenant north`,
		Args:    exactArgs("POOL/GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := groupName(args[0])
			if err != nil {
				return err
			}
			fs := cmd.Flags()
			gr := &ipamv1.GlobalGroup{Name: name, Etag: etag}
			var paths []string
			if fs.Changed("tenant") {
				if gr.Tenants, err = tenantNames(tenants); err != nil {
					return err
				}
				paths = append(paths, "tenants")
			}
			if fs.Changed("description") {
				gr.Description = description
				paths = append(paths, "description")
			}
			if len(paths) == 0 {
				return fmt.Errorf("nothing to update: set --tenant or --description")
			}
			return groupKind().one(cmd, g, func(ctx context.Context, c ipamv1.GlobalGroupServiceClient) (*ipamv1.GlobalGroup, error) {
				resp, err := c.UpdateGlobalGroup(ctx, &ipamv1.UpdateGlobalGroupRequest{GlobalGroup: gr, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}, RequestId: requestID})
				return resp.GetGlobalGroup(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&tenants, "tenant", nil, "`TENANT` granted to join (repeat; replaces the list)")
	fs.StringVar(&description, "description", "", "new `TEXT`")
	return etagFlags(cmd, "the group", &etag, &requestID)
}

func newGroupDeleteCommand(g *globals) *cobra.Command {
	var etag, requestID string
	return etagFlags(groupKind().deleteCommand(g, &cobra.Command{
		Use:     "delete POOL/GROUP",
		Short:   "Delete a global group that has no members",
		Example: `  beaconctl group delete anycast/web`,
	}, "POOL/GROUP", groupName, func(ctx context.Context, c ipamv1.GlobalGroupServiceClient, name string) (proto.Message, error) {
		return c.DeleteGlobalGroup(ctx, &ipamv1.DeleteGlobalGroupRequest{Name: name, Etag: etag, RequestId: requestID})
	}), "the group", &etag, &requestID)
}
