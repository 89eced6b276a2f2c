package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func newAuditCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the record of every allocate and release",
		Example: `  beaconctl audit list --tenant acme
  beaconctl audit list --filter 'action = "RELEASE" AND pool = "pools/web"'`,
	}
	cmd.AddCommand(newAuditListCommand(g))
	return cmd
}

func auditResourceName(r *ipamv1.AuditRecord) string { return r.GetName() }

func newAuditListCommand(g *globals) *cobra.Command {
	var (
		tenant string
		filter string
		pages  pageFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit records, newest first",
		Long: `List audit records, newest first: who did what to which allocation, when.

--filter is a conjunction of terms joined by AND, each FIELD = "VALUE" with
FIELD one of action (ALLOCATE, RELEASE, RENEW, EXPIRE, HOLD_END), owner,
pool, address or actor.`,
		Example: `  beaconctl audit list
  beaconctl audit list --tenant acme --filter 'owner = "default/web"'
  beaconctl audit list --filter 'address = "192.0.2.7"' --page-size 20 --all=false`,
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
			client := ipamv1.NewAuditServiceClient(conn)
			recs, err := fetchPages(cmd.Context(), g, &pages, func(ctx context.Context, token string) ([]*ipamv1.AuditRecord, string, error) {
				resp, err := client.ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{
					Parent:    parent,
					PageSize:  pages.size,
					PageToken: token,
					Filter:    filter,
				})
				return resp.GetAuditRecords(), resp.GetNextPageToken(), err
			})
			if err != nil {
				return err
			}
			return printList(g, cmd.OutOrStdout(), recs, auditResourceName, output.AuditTable)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "-", "`TENANT` whose records to list; \"-\" for every tenant")
	fs.StringVar(&filter, "filter", "", "only records matching this `FILTER` (see above)")
	pages.register(fs, "records")
	return cmd
}
