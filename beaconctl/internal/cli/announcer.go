package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func newAnnouncerCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "announcer",
		Aliases: []string{"announcers"},
		Short:   "Inspect the nodes that announce addresses, and drain them",
		Long: `Inspect announcers, the nodes that announce allocated addresses over L2
and BGP, and drain them before maintenance.

An announcer is named "tenants/TENANT/announcers/NODE"; commands take the
NODE with --tenant, or the full name. list and get show the nodes
subscribed now (live) and the nodes drained while away.`,
		Example: `  beaconctl announcer list
  beaconctl announcer get node-1 --tenant acme
  beaconctl announcer drain node-1 --tenant acme
  beaconctl announcer undrain node-1 --tenant acme`,
	}
	cmd.AddCommand(
		newAnnouncerGetCommand(g),
		newAnnouncerListCommand(g),
		newAnnouncerDrainCommand(g, true),
		newAnnouncerDrainCommand(g, false),
	)
	return cmd
}

// announcerKind is the announcer resource for the shared command shapes.
func announcerKind() resourceKind[ipamv1.AnnouncerServiceClient, *ipamv1.Announcer] {
	return resourceKind[ipamv1.AnnouncerServiceClient, *ipamv1.Announcer]{
		client: ipamv1.NewAnnouncerServiceClient,
		name:   (*ipamv1.Announcer).GetName,
		table:  output.AnnouncerTable,
	}
}

func newAnnouncerGetCommand(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get NODE --tenant TENANT",
		Short: "Show what a node announces, on which interfaces, to which peers",
		Long: `Show an announcer: whether it is live and drained, its labels and
interfaces, each address it reports it announces with the protocol and the
interfaces (L2) or peers (BGP), and each BGP session with its state and
BFD ("up", or "-" when BFD is down or not configured).`,
		Example: `  beaconctl announcer get node-1 --tenant acme
  beaconctl announcer get tenants/acme/announcers/node-1 -o json`,
		Args: exactArgs("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseConfigRef("announcers", args[0], tenant)
			if err != nil {
				return err
			}
			details := announcerKind()
			details.table = func(w io.Writer, as []*ipamv1.Announcer) error { return output.AnnouncerDetails(w, as[0]) }
			return details.one(cmd, g, func(ctx context.Context, c ipamv1.AnnouncerServiceClient) (*ipamv1.Announcer, error) {
				resp, err := c.GetAnnouncer(ctx, &ipamv1.GetAnnouncerRequest{Name: ref.Name})
				return resp.GetAnnouncer(), err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "`TENANT` of the node (required unless NODE is a full name)")
	return cmd
}

func newAnnouncerListCommand(g *globals) *cobra.Command {
	var (
		tenant string
		pages  pageFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the announcers subscribed now, and those drained while away",
		Long: `List the announcers subscribed now (live), in name order, of one tenant
or of every tenant; after them, the nodes drained while away (LIVE false,
DRAINING true), so that a forgotten drain can be found.

INTERFACES marks the interfaces that are down, ANNOUNCED counts the
addresses the node reports it announces, and SESSIONS is its established
and configured BGP sessions (ESTABLISHED/TOTAL).`,
		Example: `  beaconctl announcer list
  beaconctl announcer list --tenant acme -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			parent, err := tenantParent(tenant)
			if err != nil {
				return err
			}
			return announcerKind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.AnnouncerServiceClient, token string) ([]*ipamv1.Announcer, string, error) {
				resp, err := c.ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: parent, PageSize: pages.size, PageToken: token})
				return resp.GetAnnouncers(), resp.GetNextPageToken(), err
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "-", "`TENANT` whose announcers to list; \"-\" for every tenant")
	pages.register(fs, "announcers")
	return cmd
}

// newAnnouncerDrainCommand builds announcer drain, or announcer undrain.
func newAnnouncerDrainCommand(g *globals, drain bool) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "drain NODE --tenant TENANT",
		Short: "Move a node's addresses away and withdraw its routes, before maintenance",
		Long: `Drain a node before maintenance: its L2 addresses move to other nodes (the
new node announces before this one stops) and its BGP routes are withdrawn.
The drain lasts until 'announcer undrain', also across the node's
restarts. Draining is idempotent.

A node that is not subscribed now can be drained ahead of time; as that is
also what a misspelt NODE does, a warning says so.`,
		Example: `  beaconctl announcer drain node-1 --tenant acme
  beaconctl announcer drain tenants/acme/announcers/node-1 -o json`,
	}
	if !drain {
		cmd.Use = "undrain NODE --tenant TENANT"
		cmd.Short = "End a node's drain, so that it announces again"
		cmd.Long = `End the drain of a node, so that it may announce addresses again.
Undraining a node that is not drained changes nothing. A node that is
not subscribed now is shown neither live nor draining: once undrained,
'announcer get' no longer finds it.`
		cmd.Example = `  beaconctl announcer undrain node-1 --tenant acme
  beaconctl announcer undrain tenants/acme/announcers/node-1 -o name`
	}
	cmd.Args = exactArgs("NODE")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ref, err := parseConfigRef("announcers", args[0], tenant)
		if err != nil {
			return err
		}
		kind := announcerKind()
		a, err := callOnce(cmd.Context(), g, kind.client, func(ctx context.Context, c ipamv1.AnnouncerServiceClient) (*ipamv1.Announcer, error) {
			if drain {
				resp, err := c.DrainAnnouncer(ctx, &ipamv1.DrainAnnouncerRequest{Name: ref.Name})
				return resp.GetAnnouncer(), err
			}
			resp, err := c.UndrainAnnouncer(ctx, &ipamv1.UndrainAnnouncerRequest{Name: ref.Name})
			return resp.GetAnnouncer(), err
		})
		if err != nil {
			return err
		}
		if drain && !a.GetLive() {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not subscribed now; the drain applies when it subscribes (check the node name)\n", ref.Name)
		}
		return kind.print(g, cmd.OutOrStdout(), a)
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "`TENANT` of the node (required unless NODE is a full name)")
	return cmd
}
