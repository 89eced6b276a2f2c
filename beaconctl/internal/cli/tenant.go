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

// tenantName turns "acme" or "tenants/acme" into "tenants/acme"; unlike
// tenantParent it refuses "-", which names no one tenant.
func tenantName(s string) (string, error) {
	name, err := tenantParent(s)
	if err != nil {
		return "", err
	}
	if name == "tenants/-" {
		return "", fmt.Errorf("tenant - (every tenant) cannot name one tenant")
	}
	return name, nil
}

func newTenantCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tenant",
		Aliases: []string{"tenants"},
		Short:   "Manage tenants and their address quotas",
		Long: `Manage tenants: the clusters and provisioning systems that own allocations.

A tenant is named "tenants/ID"; ID is 1-63 lower-case letters, digits and
'-', and may be given without the "tenants/" prefix. Allocations may name a
tenant that has no tenant resource; creating one sets its quota,
--max-addresses (every address family counted; 0 for no limit). Allocations
past the quota fail with ResourceExhausted. Deleting a tenant deletes the
resource, not its allocations. Managing tenants needs the admin role.`,
		Example: `  beaconctl tenant create acme --display-name "ACME prod cluster" --max-addresses 64
  beaconctl tenant list
  beaconctl tenant update acme --max-addresses 128
  beaconctl tenant delete acme`,
	}
	cmd.AddCommand(
		newTenantCreateCommand(g),
		newTenantGetCommand(g),
		newTenantListCommand(g),
		newTenantUpdateCommand(g),
		newTenantDeleteCommand(g),
	)
	return cmd
}

// tenantKind is the tenant resource for the shared command shapes.
func tenantKind() resourceKind[ipamv1.TenantServiceClient, *ipamv1.Tenant] {
	return resourceKind[ipamv1.TenantServiceClient, *ipamv1.Tenant]{
		client: ipamv1.NewTenantServiceClient,
		name:   (*ipamv1.Tenant).GetName,
		table:  output.TenantTable,
	}
}

func newTenantCreateCommand(g *globals) *cobra.Command {
	var (
		displayName  string
		maxAddresses uint64
		requestID    string
	)
	cmd := &cobra.Command{
		Use:   "create ID [flags]",
		Short: "Create a tenant",
		Example: `  beaconctl tenant create acme
  beaconctl tenant create lab --display-name "Lab machines" --max-addresses 256`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := tenantName(args[0])
			if err != nil {
				return err
			}
			return tenantKind().one(cmd, g, func(ctx context.Context, c ipamv1.TenantServiceClient) (*ipamv1.Tenant, error) {
				resp, err := c.CreateTenant(ctx, &ipamv1.CreateTenantRequest{
					TenantId:  strings.TrimPrefix(name, "tenants/"),
					Tenant:    &ipamv1.Tenant{DisplayName: displayName, MaxAddresses: maxAddresses},
					RequestId: requestID,
				})
				return resp.GetTenant(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&displayName, "display-name", "", "`TEXT` naming the tenant for people")
	fs.Uint64Var(&maxAddresses, "max-addresses", 0, "the most addresses `N` the tenant may hold at once, every family counted (0: no limit)")
	fs.StringVar(&requestID, "request-id", "", "`ID` that makes retries safe")
	return cmd
}

func newTenantGetCommand(g *globals) *cobra.Command {
	return tenantKind().getCommand(g, &cobra.Command{
		Use:   "get ID",
		Short: "Show a tenant with its usage",
		Example: `  beaconctl tenant get acme
  beaconctl tenant get tenants/acme -o json`,
	}, "ID", tenantName, func(ctx context.Context, c ipamv1.TenantServiceClient, name string) (*ipamv1.Tenant, error) {
		resp, err := c.GetTenant(ctx, &ipamv1.GetTenantRequest{Name: name})
		return resp.GetTenant(), err
	})
}

func newTenantListCommand(g *globals) *cobra.Command {
	var pages pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tenants with their usage",
		Example: `  beaconctl tenant list
  beaconctl tenant list -o name`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return tenantKind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.TenantServiceClient, token string) ([]*ipamv1.Tenant, string, error) {
				resp, err := c.ListTenants(ctx, &ipamv1.ListTenantsRequest{PageSize: pages.size, PageToken: token})
				return resp.GetTenants(), resp.GetNextPageToken(), err
			})
		},
	}
	pages.register(cmd.Flags(), "tenants")
	return cmd
}

func newTenantUpdateCommand(g *globals) *cobra.Command {
	var (
		displayName  string
		maxAddresses uint64
		etag         string
		requestID    string
	)
	cmd := &cobra.Command{
		Use:   "update ID [flags]",
		Short: "Change a tenant's display name or quota",
		Long: `Change the fields of a tenant named by the flags that are set; other fields
are left as they are. Lowering --max-addresses below what the tenant holds
releases nothing: it only refuses new allocations.`,
		Example: `  beaconctl tenant update acme --max-addresses 128
  beaconctl tenant update acme --max-addresses 0          # no limit
  beaconctl tenant update acme --display-name "ACME" --etag "$ETAG"`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := tenantName(args[0])
			if err != nil {
				return err
			}
			fs := cmd.Flags()
			tenant := &ipamv1.Tenant{Name: name, Etag: etag}
			var paths []string
			if fs.Changed("display-name") {
				tenant.DisplayName = displayName
				paths = append(paths, "display_name")
			}
			if fs.Changed("max-addresses") {
				tenant.MaxAddresses = maxAddresses
				paths = append(paths, "max_addresses")
			}
			if len(paths) == 0 {
				return fmt.Errorf("nothing to update: set --display-name or --max-addresses")
			}
			return tenantKind().one(cmd, g, func(ctx context.Context, c ipamv1.TenantServiceClient) (*ipamv1.Tenant, error) {
				resp, err := c.UpdateTenant(ctx, &ipamv1.UpdateTenantRequest{
					Tenant:     tenant,
					UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
					RequestId:  requestID,
				})
				return resp.GetTenant(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&displayName, "display-name", "", "new display name `TEXT`")
	fs.Uint64Var(&maxAddresses, "max-addresses", 0, "new quota `N` (0: no limit)")
	return etagFlags(cmd, "the tenant", &etag, &requestID)
}

func newTenantDeleteCommand(g *globals) *cobra.Command {
	var etag, requestID string
	return etagFlags(tenantKind().deleteCommand(g, &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a tenant (not its allocations)",
		Example: `  beaconctl tenant delete acme
  beaconctl tenant delete acme --etag "$ETAG"`,
	}, "ID", tenantName, func(ctx context.Context, c ipamv1.TenantServiceClient, name string) (proto.Message, error) {
		return c.DeleteTenant(ctx, &ipamv1.DeleteTenantRequest{Name: name, Etag: etag, RequestId: requestID})
	}), "the tenant", &etag, &requestID)
}
