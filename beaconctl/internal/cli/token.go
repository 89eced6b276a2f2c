package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// printDeleted reports that name was deleted: resp as JSON, the name, or a
// sentence.
func printDeleted(g *globals, w io.Writer, name string, resp proto.Message) error {
	switch g.output {
	case output.JSON:
		return output.WriteJSON(w, resp)
	case output.Name:
		return output.WriteNames(w, name)
	}
	_, err := fmt.Fprintf(w, "deleted %s\n", name)
	return err
}

// tokenName turns "ci" or "tokens/ci" into "tokens/ci".
func tokenName(s string) (string, error) {
	id := strings.TrimPrefix(s, "tokens/")
	if id == "" || strings.Contains(id, "/") {
		return "", fmt.Errorf("invalid token name %q: want ID or tokens/ID", s)
	}
	return "tokens/" + id, nil
}

// roleNames are the roles as --role spells them.
var roleNames = map[string]ipamv1.Role{
	"admin":     ipamv1.Role_ROLE_ADMIN,
	"tenant":    ipamv1.Role_ROLE_TENANT,
	"announcer": ipamv1.Role_ROLE_ANNOUNCER,
	"viewer":    ipamv1.Role_ROLE_VIEWER,
}

// parseRole reads --role: admin, tenant, announcer or viewer.
func parseRole(s string) (ipamv1.Role, error) {
	r, ok := roleNames[strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "ROLE_"))]
	if !ok {
		return 0, fmt.Errorf("unknown --role %q: use one of admin, tenant, announcer, viewer", s)
	}
	return r, nil
}

func newTokenCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Issue, list and revoke the gateway's bearer tokens",
		Long: `Issue, list and revoke the bearer tokens the gateway accepts.

A token is named "tokens/ID"; ID is 1-63 lower-case letters, digits and '-',
and may be given without the "tokens/" prefix. Its role says what its holder
may do:

  admin       everything: pools, config, tenants, tokens
  tenant      allocate, release and list its tenant's allocations, read the
              pools it may use, manage its tenant's announcement config
  announcer   subscribe and report for its tenant's nodes
  viewer      read everything, change nothing

Tenant and announcer tokens belong to one tenant (--tenant). Only a hash of
the secret is stored: "token create" prints the secret once, and it cannot be
shown again. Managing tokens needs the admin role.`,
		Example: `  beaconctl token create acme-cluster --role tenant --tenant acme --expires 720h
  beaconctl token list
  beaconctl token delete acme-cluster`,
	}
	cmd.AddCommand(
		newTokenCreateCommand(g),
		newTokenGetCommand(g),
		newTokenListCommand(g),
		newTokenDeleteCommand(g),
	)
	return cmd
}

// tokenKind is the token resource for the shared command shapes.
func tokenKind() resourceKind[ipamv1.TokenServiceClient, *ipamv1.Token] {
	return resourceKind[ipamv1.TokenServiceClient, *ipamv1.Token]{
		client: ipamv1.NewTokenServiceClient,
		name:   (*ipamv1.Token).GetName,
		table:  output.TokenTable,
	}
}

type tokenCreateFlags struct {
	role        string
	tenant      string
	description string
	expires     time.Duration
	requestID   string
}

// request builds the CreateTokenRequest for token create ID; now is the
// time --expires counts from.
func (f *tokenCreateFlags) request(arg string, now time.Time) (*ipamv1.CreateTokenRequest, error) {
	name, err := tokenName(arg)
	if err != nil {
		return nil, err
	}
	if f.role == "" {
		return nil, fmt.Errorf("token create needs --role: admin, tenant, announcer or viewer")
	}
	role, err := parseRole(f.role)
	if err != nil {
		return nil, err
	}
	tok := &ipamv1.Token{Role: role, Description: f.description}
	switch role {
	case ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER:
		if f.tenant == "" {
			return nil, fmt.Errorf("%s tokens need --tenant", output.Role(role))
		}
		if tok.Tenant, err = tenantName(f.tenant); err != nil {
			return nil, err
		}
	default:
		if f.tenant != "" {
			return nil, fmt.Errorf("%s tokens belong to no tenant: drop --tenant", output.Role(role))
		}
	}
	if f.expires < 0 {
		return nil, fmt.Errorf("--expires must not be negative")
	}
	if f.expires > 0 {
		tok.ExpireTime = timestamppb.New(now.Add(f.expires))
	}
	return &ipamv1.CreateTokenRequest{
		TokenId:   strings.TrimPrefix(name, "tokens/"),
		Token:     tok,
		RequestId: f.requestID,
	}, nil
}

func newTokenCreateCommand(g *globals) *cobra.Command {
	f := &tokenCreateFlags{}
	cmd := &cobra.Command{
		Use:   "create ID --role ROLE [flags]",
		Short: "Issue a token and print its secret, once",
		Long: `Issue a token and print its secret. The secret is shown this once: store
it now (the gateway keeps only a hash). Present it as
"authorization: Bearer SECRET", or to beaconctl with --token or
BEACON_TOKEN.

With -o table the token is printed as a table followed by a line
"secret: SECRET"; with -o json the output is {"token": ..., "secret": ...}.
-o name is refused, since it would lose the secret. A warning goes to
stderr either way.`,
		Example: `  # A token for tenant acme's cluster, valid for 30 days.
  beaconctl token create acme-cluster --role tenant --tenant acme --expires 720h

  # A read-only token for a dashboard, secret captured for a script.
  beaconctl token create grafana --role viewer --description "grafana" -o json | jq -r .secret`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.output == output.Name {
				return fmt.Errorf("token create -o name would print only the name and lose the secret, which is shown once: use -o table or -o json")
			}
			req, err := f.request(args[0], time.Now())
			if err != nil {
				return err
			}
			resp, err := callOnce(cmd.Context(), g, ipamv1.NewTokenServiceClient, func(ctx context.Context, c ipamv1.TokenServiceClient) (*ipamv1.CreateTokenResponse, error) {
				return c.CreateToken(ctx, req)
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if g.output == output.JSON {
				err = output.WriteJSON(w, resp)
			} else {
				if err = output.TokenTable(w, []*ipamv1.Token{resp.GetToken()}); err == nil {
					_, err = fmt.Fprintf(w, "secret: %s\n", resp.GetSecret())
				}
			}
			if err != nil {
				return err
			}
			if resp.GetSecret() == "" {
				// A retry with the same --request-id gets no secret.
				fmt.Fprintf(g.env.Stderr, "warning: the server returned no secret for %s (a retried request gets none): delete the token and issue a new one\n", resp.GetToken().GetName())
				return nil
			}
			fmt.Fprintf(g.env.Stderr, "warning: this is the only time the secret of %s is shown; store it now, it cannot be shown again\n", resp.GetToken().GetName())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.role, "role", "", "`ROLE` of the token: admin, tenant, announcer or viewer (required)")
	fs.StringVar(&f.tenant, "tenant", "", "`TENANT` the token belongs to (required for the tenant and announcer roles)")
	fs.StringVar(&f.description, "description", "", "free `TEXT` for people")
	fs.DurationVar(&f.expires, "expires", 0, "the token stops working after `DURATION`, e.g. 720h (default: never)")
	fs.StringVar(&f.requestID, "request-id", "", "`ID` that makes retries safe (a retry gets no secret)")
	return cmd
}

func newTokenGetCommand(g *globals) *cobra.Command {
	return tokenKind().getCommand(g, &cobra.Command{
		Use:   "get ID",
		Short: "Show a token (never its secret)",
		Example: `  beaconctl token get acme-cluster
  beaconctl token get tokens/acme-cluster -o json`,
	}, "ID", tokenName, func(ctx context.Context, c ipamv1.TokenServiceClient, name string) (*ipamv1.Token, error) {
		resp, err := c.GetToken(ctx, &ipamv1.GetTokenRequest{Name: name})
		return resp.GetToken(), err
	})
}

func newTokenListCommand(g *globals) *cobra.Command {
	var pages pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Example: `  beaconctl token list
  beaconctl token list -o name`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return tokenKind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.TokenServiceClient, token string) ([]*ipamv1.Token, string, error) {
				resp, err := c.ListTokens(ctx, &ipamv1.ListTokensRequest{PageSize: pages.size, PageToken: token})
				return resp.GetTokens(), resp.GetNextPageToken(), err
			})
		},
	}
	pages.register(cmd.Flags(), "tokens")
	return cmd
}

func newTokenDeleteCommand(g *globals) *cobra.Command {
	return tokenKind().deleteCommand(g, &cobra.Command{
		Use:     "delete ID",
		Aliases: []string{"revoke"},
		Short:   "Revoke a token",
		Example: `  beaconctl token delete acme-cluster
  beaconctl token revoke tokens/acme-cluster`,
	}, "ID", tokenName, func(ctx context.Context, c ipamv1.TokenServiceClient, name string) (proto.Message, error) {
		return c.DeleteToken(ctx, &ipamv1.DeleteTokenRequest{Name: name})
	})
}
