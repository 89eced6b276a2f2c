package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/spiffeid"
)

// newCertsCommand makes certificates offline, from a CA directory: the
// IPAM's server certificate and one client certificate per caller, each
// carrying its role in a SPIFFE ID (docs/security.md).
func newCertsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make the CA and the certificates IPAM callers present",
		Long: `Make certificates offline, without contacting any server.

Every caller of the IPAM presents a client certificate whose only SPIFFE ID
says its role and what it is bound to:

  spiffe://DOMAIN/gateway                        the gateway
  spiffe://DOMAIN/admin/NAME                     an operator
  spiffe://DOMAIN/tenant/TENANT/adapter/CLUSTER  a Kubernetes adapter
  spiffe://DOMAIN/tenant/TENANT/announcer/NODE   one node's announcer

"certs ca" makes a CA in a directory (ca.pem, ca-key.pem); keep that
directory off the network. "certs issue" signs a client certificate with
it, "certs server" the IPAM's server certificate. "certs dev" makes a whole
set for one machine (make run).`,
		Example: `  beaconctl certs ca --dir ca
  beaconctl certs server --dir ca --host ipamd.beacon-system.svc
  beaconctl certs issue --dir ca --role announcer --tenant c1 --name node-7`,
	}
	cmd.AddCommand(newCertsCACommand(), newCertsIssueCommand(), newCertsServerCommand(), newCertsDevCommand(), newCertsDeployCommand())
	return cmd
}

func newCertsCACommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:     "ca",
		Short:   "Make a CA in a directory",
		Example: "  beaconctl certs ca --dir /secure/beacon-ca",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(filepath.Join(dir, devcerts.CAFile)); err == nil {
				return fmt.Errorf("%s already holds a CA; it is kept (certificates it signed stay valid)", dir)
			}
			ca, err := devcerts.NewCA("Beacon CA")
			if err != nil {
				return err
			}
			key, err := ca.KeyPEM()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			if err := writePair(filepath.Join(dir, devcerts.CAFile), ca.CertPEM(), filepath.Join(dir, devcerts.CAKeyFile), key); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA written to %s (%s, %s)\n", dir, devcerts.CAFile, devcerts.CAKeyFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "`DIR` to write the CA to (required)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func loadCA(dir string) (*devcerts.CA, error) {
	c, err := os.ReadFile(filepath.Join(dir, devcerts.CAFile))
	if err != nil {
		return nil, fmt.Errorf("reading the CA (make one with 'beaconctl certs ca'): %w", err)
	}
	k, err := os.ReadFile(filepath.Join(dir, devcerts.CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("reading the CA's key: %w", err)
	}
	return devcerts.LoadCA(c, k)
}

func newCertsIssueCommand() *cobra.Command {
	var (
		dir, role, tenant, name, domain, out string
		valid                                time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Sign a client certificate for one caller",
		Example: `  beaconctl certs issue --dir ca --role announcer --tenant c1 --name node-7 --valid 2160h
  beaconctl certs issue --dir ca --role adapter --tenant c1 --name prod
  beaconctl certs issue --dir ca --role gateway
  beaconctl certs issue --dir ca --role admin --name alice --valid 24h`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			id := spiffeid.ID{TrustDomain: domain, Role: spiffeid.Role(role), Tenant: tenant, Name: name}
			if err := id.Validate(); err != nil {
				return err
			}
			ca, err := loadCA(dir)
			if err != nil {
				return err
			}
			c, k, err := ca.ClientFor(id.String(), valid)
			if err != nil {
				return err
			}
			if out == "" {
				cf, _ := devcerts.ClientFiles(id.String())
				out = filepath.Join(dir, cf[:len(cf)-len(".pem")])
			}
			if err := writePair(out+".pem", c, out+"-key.pem", k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s.pem, %s-key.pem (valid %v)\n", id, out, out, valid)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "`DIR` of the CA (required)")
	f.StringVar(&role, "role", "", "`ROLE`: gateway, admin, adapter or announcer (required)")
	f.StringVar(&tenant, "tenant", "", "`TENANT` an adapter or announcer is bound to")
	f.StringVar(&name, "name", "", "the admin's `NAME`, the adapter's cluster, the announcer's node")
	f.StringVar(&domain, "trust-domain", "beacon", "SPIFFE trust `DOMAIN` (ipamd --trust-domain)")
	f.DurationVar(&valid, "valid", 90*24*time.Hour, "how long the certificate is valid")
	f.StringVar(&out, "out", "", "`PREFIX` of the files written (PREFIX.pem, PREFIX-key.pem); default in DIR, named after the identity")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func newCertsServerCommand() *cobra.Command {
	var (
		dir, out string
		hosts    []string
		valid    time.Duration
	)
	cmd := &cobra.Command{
		Use:     "server",
		Short:   "Sign the IPAM's (or the gateway's) server certificate",
		Example: "  beaconctl certs server --dir ca --host ipamd.beacon-system.svc --host 127.0.0.1",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ca, err := loadCA(dir)
			if err != nil {
				return err
			}
			c, k, err := ca.ServerFor(valid, hosts...)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(dir, "server")
			}
			if err := writePair(out+".pem", c, out+"-key.pem", k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "server certificate for %v: %s.pem, %s-key.pem\n", hosts, out, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "`DIR` of the CA (required)")
	f.StringSliceVar(&hosts, "host", nil, "DNS name or IP address the server is reached at (repeatable; default localhost, 127.0.0.1, ::1)")
	f.DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificate is valid")
	f.StringVar(&out, "out", "", "`PREFIX` of the files written; default DIR/server")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// DevIdentities are the IPAM callers "certs dev" makes certificates for.
func devIdentities(tenant, node string) []spiffeid.ID {
	return []spiffeid.ID{
		{TrustDomain: "beacon", Role: spiffeid.Gateway},
		{TrustDomain: "beacon", Role: spiffeid.Admin, Name: "dev"},
		{TrustDomain: "beacon", Role: spiffeid.Adapter, Tenant: tenant, Name: "dev"},
		{TrustDomain: "beacon", Role: spiffeid.Announcer, Tenant: tenant, Name: node},
	}
}

func newCertsDevCommand() *cobra.Command {
	var dir, tenant, node string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Make a CA, a localhost server certificate and one certificate per role, for one machine",
		Long: `Make what running Beacon on one machine needs, where it is missing: a CA,
a server certificate for localhost, 127.0.0.1 and ::1, and a client
certificate per role (gateway, admin "dev", adapter "dev" and announcer
NODE of TENANT), named client-beacon-....pem. The CA is reused if present.
Nothing here is meant for production: the CA's key sits next to the
certificates.`,
		Example: "  beaconctl certs dev --dir .data/certs",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ids []string
			for _, id := range devIdentities(tenant, node) {
				ids = append(ids, id.String())
			}
			p, err := devcerts.Ensure(dir, ids...)
			if err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", id, p.Clients[id].Cert)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "`DIR` to write to (required)")
	f.StringVar(&tenant, "tenant", "demo", "`TENANT` of the adapter and announcer")
	f.StringVar(&node, "node", "dev-node", "`NODE` of the announcer")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// writePair writes a certificate (0644) and its key (0600), never over an
// existing key.
func writePair(certPath string, cert []byte, keyPath string, key []byte) error {
	f, err := os.OpenFile(keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: not overwritten (remove it to make a new one)", keyPath)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(key); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(certPath, cert, 0o644) //nolint:gosec // certificates are public
}
