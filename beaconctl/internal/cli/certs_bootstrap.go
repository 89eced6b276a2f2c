package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// newCertsBootstrapCommand asks the IPAM for a one-time bootstrap token a
// bare-metal announcer trades for its certificate.
func newCertsBootstrapCommand(g *globals) *cobra.Command {
	var (
		tenant, node string
		valid        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bootstrap --tenant T --node N [--valid 1h]",
		Short: "Print a one-time token a node trades for its announcer certificate",
		Long: `Ask the IPAM (as an admin) for a bootstrap token bound to one node of one
tenant, and print it. Give it to the node (announcerd --bootstrap-token-file
F --cert-dir D): announcerd makes a key and a certificate signing request,
trades the token for a certificate naming that node (signed by ipamd's
--node-issuer-cert), and connects with it. The token works once, until
--valid has passed; only its hash is stored. This talks to the IPAM, unlike
the other certs commands.`,
		Example: `  beaconctl certs bootstrap --tenant c1 --node node-7 --valid 1h > node-7.token`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer func() { _ = conn.Close() }()
			ctx, cancel := g.callContext(cmd.Context())
			defer cancel()
			resp, err := ipamv1.NewCertificateServiceClient(conn).CreateBootstrapToken(ctx, &ipamv1.CreateBootstrapTokenRequest{
				Parent: "tenants/" + tenant, Node: node, Ttl: durationpb.New(valid),
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), resp.GetToken())
			fmt.Fprintf(cmd.ErrOrStderr(), "bootstrap token for node %q of tenant %q, usable once until %s\n",
				node, tenant, resp.GetExpireTime().AsTime().Format(time.RFC3339))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the node's `TENANT` (required)")
	f.StringVar(&node, "node", "", "the node's `NAME`, as its certificate will carry it (required)")
	f.DurationVar(&valid, "valid", time.Hour, "how long the token may be traded (1s to 168h)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("node")
	return cmd
}
