package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/spiffeid"
)

// deployOptions are the flags of "certs deploy".
type deployOptions struct {
	dir, namespace, tenant, cluster, domain, format, out string
	ipamHosts, gatewayHosts, etcdHosts, nodes, admins    []string
	valid                                                time.Duration
}

// credential is one role's certificate: its key pair and the CA that
// verifies its peers, written as ca.crt, tls.crt and tls.key (a Secret's
// keys, or a directory's files).
type credential struct {
	// Name is the directory (files) and, prefixed with "beacon-", the
	// Secret (kubernetes) it goes to.
	Name string
	// What is shown in the summary: the SPIFFE ID or the host names.
	What string
	make func(ca *devcerts.CA) (cert, key []byte, err error)
}

// Errors of certs deploy's flags.
var (
	errDeployFormat = errors.New("--format: must be kubernetes or files")
	errDeployOut    = errors.New("--out: required with --format files")
)

func newCertsDeployCommand() *cobra.Command {
	var o deployOptions
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Make one certificate per role for a deployment, as Kubernetes Secrets or files",
		Long: `Make every certificate a Beacon deployment needs, one per role, signed by
the CA in --dir (made there if missing; its key never leaves --dir):

  ipam-tls                   ipamd's server certificate (--ipam-host); its
                             ca.crt verifies the IPAM's callers
  gateway-tls                the gateway's server certificate (--gateway-host)
  gateway-ipam-client        spiffe://DOMAIN/gateway, the gateway's certificate for the IPAM
  k8s-adapter-ipam-client    spiffe://DOMAIN/tenant/TENANT/adapter/CLUSTER (with --tenant)
  announcer-NODE             spiffe://DOMAIN/tenant/TENANT/announcer/NODE, per --node
  etcd-client                ipamd's client certificate for etcd
  etcd-peer                  the etcd members' server and peer certificate (--etcd-host)
  admin-NAME                 spiffe://DOMAIN/admin/NAME, per --admin

No certificate is shared between roles. --format kubernetes (the default)
writes them to standard output as a list of Secrets named beacon-NAME in
--namespace, with the ConfigMap beacon-ipam-ca (the CA alone, which the
announcers verify the IPAM with), for 'kubectl apply -f -'; every run makes new certificates, so
running it again (and restarting the pods) rotates them. --format files
writes DIR/NAME/{ca.crt,tls.crt,tls.key} under --out and keeps what is
already there (the compose lab runs it at every start).`,
		Example: `  beaconctl certs deploy --dir ./beacon-ca --tenant c1 --cluster prod | kubectl apply -f -
  beaconctl certs deploy --dir /certs/ca --format files --out /certs --tenant lab \
      --ipam-host ipamd-1 --ipam-host ipamd-2 --gateway-host gateway --node node-1 --admin lab`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCertsDeploy(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "`DIR` of the CA, made there if missing (required; keep it off the cluster)")
	f.StringVar(&o.namespace, "namespace", "beacon-system", "`NAMESPACE` of the Secrets and of the default host names")
	f.StringVar(&o.tenant, "tenant", "", "`TENANT` of the adapter and the announcers")
	f.StringVar(&o.cluster, "cluster", "default", "the adapter's `CLUSTER` name")
	f.StringVar(&o.domain, "trust-domain", "beacon", "SPIFFE trust `DOMAIN` (ipamd --trust-domain)")
	f.StringSliceVar(&o.ipamHosts, "ipam-host", nil, "name or address ipamd is dialled at (repeatable; default beacon-ipamd.NAMESPACE.svc and its short forms)")
	f.StringSliceVar(&o.gatewayHosts, "gateway-host", nil, "name or address the gateway is reached at (repeatable; default beacon-gateway.NAMESPACE.svc and its short forms)")
	f.StringSliceVar(&o.etcdHosts, "etcd-host", nil, "name or address of the etcd members (repeatable; default *.beacon-etcd.NAMESPACE.svc, the with-etcd overlay's StatefulSet)")
	f.StringSliceVar(&o.nodes, "node", nil, "`NODE` to make an announcer certificate for (repeatable; needs --tenant)")
	f.StringSliceVar(&o.admins, "admin", nil, "`NAME` of an operator to make an admin certificate for (repeatable)")
	f.StringVar(&o.format, "format", "kubernetes", "kubernetes (Secrets as JSON on standard output) or files (under --out)")
	f.StringVar(&o.out, "out", "", "`DIR` to write the files to (with --format files)")
	f.DurationVar(&o.valid, "valid", 90*24*time.Hour, "how long each certificate is valid")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// serviceHosts are the names a Service NAME in namespace ns is dialled at.
func serviceHosts(name, ns string) []string {
	return []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
}

// credentials lists what o asks for, in a fixed order.
func (o deployOptions) credentials() ([]credential, error) {
	ipamHosts, gatewayHosts, etcdHosts := o.ipamHosts, o.gatewayHosts, o.etcdHosts
	if len(ipamHosts) == 0 {
		ipamHosts = serviceHosts("beacon-ipamd", o.namespace)
	}
	if len(gatewayHosts) == 0 {
		gatewayHosts = serviceHosts("beacon-gateway", o.namespace)
	}
	if len(etcdHosts) == 0 {
		etcdHosts = append(serviceHosts("beacon-etcd", o.namespace),
			"*.beacon-etcd."+o.namespace+".svc", "*.beacon-etcd."+o.namespace+".svc.cluster.local", "localhost", "127.0.0.1")
	}
	server := func(hosts []string) func(*devcerts.CA) ([]byte, []byte, error) {
		return func(ca *devcerts.CA) ([]byte, []byte, error) { return ca.ServerFor(o.valid, hosts...) }
	}
	client := func(uri string) func(*devcerts.CA) ([]byte, []byte, error) {
		return func(ca *devcerts.CA) ([]byte, []byte, error) { return ca.ClientFor(uri, o.valid) }
	}
	id := func(role spiffeid.Role, tenant, name string) (string, error) {
		i := spiffeid.ID{TrustDomain: o.domain, Role: role, Tenant: tenant, Name: name}
		if err := i.Validate(); err != nil {
			return "", err
		}
		return i.String(), nil
	}
	gw, err := id(spiffeid.Gateway, "", "")
	if err != nil {
		return nil, fmt.Errorf("--trust-domain: %w", err)
	}
	creds := []credential{
		{Name: "ipam-tls", What: fmt.Sprint(ipamHosts), make: server(ipamHosts)},
		{Name: "gateway-tls", What: fmt.Sprint(gatewayHosts), make: server(gatewayHosts)},
		{Name: "gateway-ipam-client", What: gw, make: client(gw)},
		// etcd takes any certificate its CA signed; the URI only names it.
		{Name: "etcd-client", What: "spiffe://" + o.domain + "/etcd-client", make: client("spiffe://" + o.domain + "/etcd-client")},
		{Name: "etcd-peer", What: fmt.Sprint(etcdHosts), make: func(ca *devcerts.CA) ([]byte, []byte, error) {
			return ca.PeerFor(o.valid, etcdHosts...)
		}},
	}
	if o.tenant != "" {
		a, err := id(spiffeid.Adapter, o.tenant, o.cluster)
		if err != nil {
			return nil, fmt.Errorf("--tenant, --cluster: %w", err)
		}
		creds = append(creds, credential{Name: "k8s-adapter-ipam-client", What: a, make: client(a)})
	}
	for _, n := range o.nodes {
		if o.tenant == "" {
			return nil, errors.New("--node: needs --tenant")
		}
		a, err := id(spiffeid.Announcer, o.tenant, n)
		if err != nil {
			return nil, fmt.Errorf("--node %q: %w", n, err)
		}
		creds = append(creds, credential{Name: "announcer-" + n, What: a, make: client(a)})
	}
	for _, n := range o.admins {
		a, err := id(spiffeid.Admin, "", n)
		if err != nil {
			return nil, fmt.Errorf("--admin %q: %w", n, err)
		}
		creds = append(creds, credential{Name: "admin-" + n, What: a, make: client(a)})
	}
	return creds, nil
}

func runCertsDeploy(w io.Writer, o deployOptions) error {
	switch o.format {
	case "kubernetes":
	case "files":
		if o.out == "" {
			return errDeployOut
		}
	default:
		return errDeployFormat
	}
	creds, err := o.credentials()
	if err != nil {
		return err
	}
	ca, err := loadOrMakeCA(o.dir)
	if err != nil {
		return err
	}
	if o.format == "files" {
		return writeCredentialFiles(w, ca, o.out, creds)
	}
	return writeSecrets(w, ca, o.namespace, creds)
}

// loadOrMakeCA loads the CA in dir, or makes one there.
func loadOrMakeCA(dir string) (*devcerts.CA, error) {
	if _, err := os.Stat(filepath.Join(dir, devcerts.CAFile)); err == nil {
		return loadCA(dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ca, err := devcerts.NewCA("Beacon CA")
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writePair(filepath.Join(dir, devcerts.CAFile), ca.CertPEM(), filepath.Join(dir, devcerts.CAKeyFile), key); err != nil {
		return nil, err
	}
	return ca, nil
}

// writeCredentialFiles writes OUT/NAME/{ca.crt,tls.crt,tls.key} for each
// credential whose key is not there yet.
func writeCredentialFiles(w io.Writer, ca *devcerts.CA, out string, creds []credential) error {
	for _, c := range creds {
		d := filepath.Join(out, c.Name)
		if _, err := os.Stat(filepath.Join(d, "tls.key")); err == nil {
			fmt.Fprintf(w, "%s: kept (%s)\n", d, c.What)
			continue
		}
		cert, key, err := c.make(ca)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "ca.crt"), ca.CertPEM(), 0o644); err != nil { //nolint:gosec // certificates are public
			return err
		}
		if err := writePair(filepath.Join(d, "tls.crt"), cert, filepath.Join(d, "tls.key"), key); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s\n", d, c.What)
	}
	return nil
}

// secret is the part of a Kubernetes Secret written here.
type secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   secretMeta        `json:"metadata"`
	Type       string            `json:"type"`
	Data       map[string][]byte `json:"data"`
}

type secretMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// configMap is the part of a Kubernetes ConfigMap written here.
type configMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   secretMeta        `json:"metadata"`
	Data       map[string]string `json:"data"`
}

// caConfigMap is the ConfigMap that holds the CA alone (no key), for
// callers that verify the IPAM and present no certificate: the announcers
// in Kubernetes, which authenticate with their ServiceAccount token.
const caConfigMap = "beacon-ipam-ca"

// writeSecrets writes a v1 List of kubernetes.io/tls Secrets (with ca.crt)
// and the ConfigMap beacon-ipam-ca (ca.crt) as JSON, which kubectl apply
// reads.
func writeSecrets(w io.Writer, ca *devcerts.CA, namespace string, creds []credential) error {
	items := make([]secret, 0, len(creds))
	for _, c := range creds {
		cert, key, err := c.make(ca)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		items = append(items, secret{
			APIVersion: "v1", Kind: "Secret", Type: "kubernetes.io/tls",
			Metadata: secretMeta{
				Name: "beacon-" + c.Name, Namespace: namespace,
				Labels:      map[string]string{"app.kubernetes.io/part-of": "beacon", "app.kubernetes.io/component": "credentials"},
				Annotations: map[string]string{"beacon.io/identity": c.What},
			},
			Data: map[string][]byte{"ca.crt": ca.CertPEM(), "tls.crt": cert, "tls.key": key},
		})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Metadata.Name < items[j].Metadata.Name })
	all := make([]any, 0, len(items)+1)
	for _, it := range items {
		all = append(all, it)
	}
	all = append(all, configMap{
		APIVersion: "v1", Kind: "ConfigMap",
		Metadata: secretMeta{
			Name: caConfigMap, Namespace: namespace,
			Labels:      map[string]string{"app.kubernetes.io/part-of": "beacon", "app.kubernetes.io/component": "credentials"},
			Annotations: map[string]string{"beacon.io/identity": "the CA that signs the IPAM's certificate (no key)"},
		},
		Data: map[string]string{"ca.crt": string(ca.CertPEM())},
	})
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": all})
}
