package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// configRef is a tenant-scoped resource named on the command line.
type configRef struct {
	// Name is "tenants/TENANT/COLLECTION/ID".
	Name string
	// Parent is "tenants/TENANT".
	Parent string
	// ID is the last part of Name.
	ID string
}

// parseConfigRef reads the ID argument of the commands on a tenant-scoped
// resource of collection (such as "l2Advertisements"): an ID with --tenant,
// or a full name "tenants/TENANT/COLLECTION/ID", whose tenant must match
// --tenant if that is given.
func parseConfigRef(collection, arg, tenant string) (configRef, error) {
	form := "tenants/TENANT/" + collection + "/ID"
	if rest, ok := strings.CutPrefix(arg, "tenants/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[0] == "" || parts[0] == "-" || parts[1] != collection || parts[2] == "" {
			return configRef{}, fmt.Errorf("%q is not a name of the form %s", arg, form)
		}
		ref := configRef{Name: arg, Parent: "tenants/" + parts[0], ID: parts[2]}
		if tenant != "" {
			want, err := tenantParent(tenant)
			if err != nil {
				return configRef{}, err
			}
			if want != ref.Parent {
				return configRef{}, fmt.Errorf("%s is not in --tenant %s", arg, tenant)
			}
		}
		return ref, nil
	}
	if arg == "" || strings.Contains(arg, "/") {
		return configRef{}, fmt.Errorf("invalid ID %q: want ID (with --tenant) or %s", arg, form)
	}
	if tenant == "" {
		return configRef{}, fmt.Errorf("--tenant is required (or give the full name %s)", form)
	}
	parent, err := tenantParent(tenant)
	if err != nil {
		return configRef{}, err
	}
	if parent == "tenants/-" {
		return configRef{}, fmt.Errorf("--tenant - (every tenant) cannot name one resource")
	}
	return configRef{Name: parent + "/" + collection + "/" + arg, Parent: parent, ID: arg}, nil
}

// configIDs turns references to other resources of the same tenant, given
// as IDs or as full names "tenants/TENANT/COLLECTION/ID", into IDs, as the
// API refers to them.
func configIDs(flag, collection, parent string, refs []string) ([]string, error) {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if !strings.Contains(r, "/") {
			out = append(out, r)
			continue
		}
		ref, err := parseConfigRef(collection, r, "")
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		if ref.Parent != parent {
			return nil, fmt.Errorf("--%s %s: not in %s; references stay within a tenant", flag, r, parent)
		}
		out = append(out, ref.ID)
	}
	return out, nil
}

// configResource is what the generic commands need of a resource message.
type configResource interface {
	proto.Message
	GetName() string
	GetEtag() string
}

// fieldInput is what setting a field may depend on besides the flags.
type fieldInput[M configResource] struct {
	// parent is the resource's tenant, "tenants/TENANT".
	parent string
	// current is the resource as it is: set on update for fields with
	// needsCurrent, the zero M otherwise.
	current M
}

// field is one field of a resource that flags set.
type field[M configResource] struct {
	// flags are the flags that set the field; it is set when any of them is.
	flags []string
	// path is the field's update_mask path.
	path string
	// set sets the field of m from the flags.
	set func(m M, in fieldInput[M]) error
	// needsCurrent says that the flags edit the current value (update reads
	// the resource first).
	needsCurrent bool
	// stdinFlag is the one of flags, if any, that reads standard input.
	stdinFlag string
}

// changedFields returns the fields some of whose flags were set.
func changedFields[M configResource](fs *pflag.FlagSet, fields []field[M]) []field[M] {
	var out []field[M]
	for _, f := range fields {
		if slices.ContainsFunc(f.flags, fs.Changed) {
			out = append(out, f)
		}
	}
	return out
}

// configKind describes one kind of tenant-scoped resource of the
// AnnouncementService for the generic create, get, list, update and delete
// commands.
type configKind[M configResource] struct {
	// use is the command's name, e.g. "l2adv".
	use     string
	aliases []string
	// noun and plural name the resource for people, e.g. "L2 advertisement".
	noun, plural string
	// collection is the collection in resource names, e.g. "l2Advertisements".
	collection string
	// sampleID is the ID the generated examples use.
	sampleID string

	short, long, example      string
	createLong, createExample string
	updateLong, updateExample string

	newMsg func() M
	// fields registers the field flags on fs, worded for create or update,
	// in field order.
	fields func(g *globals, fs *pflag.FlagSet, update bool) []field[M]
	table  func(io.Writer, []M) error

	create func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m M, requestID string, validateOnly bool) (M, error)
	get    func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (M, error)
	list   func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]M, string, error)
	update func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m M, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (M, error)
	delete func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error)
}

// kind is k for the shared command shapes.
func (k *configKind[M]) kind() resourceKind[ipamv1.AnnouncementServiceClient, M] {
	return resourceKind[ipamv1.AnnouncementServiceClient, M]{client: ipamv1.NewAnnouncementServiceClient, name: resourceName[M], table: k.table}
}

func resourceName[M configResource](m M) string { return m.GetName() }

// newConfigCommand builds the command group of one kind.
func newConfigCommand[M configResource](g *globals, k *configKind[M]) *cobra.Command {
	cmd := &cobra.Command{
		Use:     k.use,
		Aliases: k.aliases,
		Short:   k.short,
		Long:    k.long,
		Example: k.example,
	}
	cmd.AddCommand(
		k.createCommand(g),
		k.getCommand(g),
		k.listCommand(g),
		k.updateCommand(g),
		k.deleteCommand(g),
	)
	return cmd
}

// atMostOneArg accepts no positional argument or one.
func atMostOneArg() cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return fmt.Errorf("%s: unexpected argument %q\nRun '%s --help' for usage", cmd.CommandPath(), args[1], cmd.CommandPath())
		}
		return nil
	}
}

// readInput reads a file, or standard input for "-".
func (g *globals) readInput(path string) ([]byte, error) {
	if path == "-" {
		if g.env.Stdin == nil {
			return nil, nil
		}
		return io.ReadAll(g.env.Stdin)
	}
	return os.ReadFile(path)
}

// readResource reads a resource as protobuf JSON from a file, or from
// standard input for "-". Unknown fields are errors, so that a misspelt
// field is not silently dropped.
func (k *configKind[M]) readResource(g *globals, path string) (M, error) {
	m := k.newMsg()
	b, err := g.readInput(path)
	if err != nil {
		return m, fmt.Errorf("reading -f: %w", err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return m, fmt.Errorf("-f %s: not a %s as JSON: %w", path, m.ProtoReflect().Descriptor().FullName(), err)
	}
	return m, nil
}

func (k *configKind[M]) createCommand(g *globals) *cobra.Command {
	var (
		tenant       string
		file         string
		requestID    string
		validateOnly bool
		fields       []field[M]
	)
	cmd := &cobra.Command{
		Use:     "create (ID --tenant TENANT | -f FILE) [flags]",
		Short:   "Create a " + k.noun,
		Long:    k.createLong + createFileHelp,
		Example: k.createExample,
		Args:    atMostOneArg(),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := changedFields(cmd.Flags(), fields)
			if file == "-" {
				for _, f := range set {
					if f.stdinFlag != "" && cmd.Flags().Changed(f.stdinFlag) {
						return fmt.Errorf("-f - and --%s cannot both read standard input", f.stdinFlag)
					}
				}
			}
			m := k.newMsg()
			if file != "" {
				var err error
				if m, err = k.readResource(g, file); err != nil {
					return err
				}
			}
			var arg string
			switch {
			case len(args) == 1:
				arg = args[0]
			case m.GetName() != "":
				arg = m.GetName()
			default:
				return fmt.Errorf("%s: missing ID (or a name in the -f file)\nRun '%s --help' for usage", cmd.CommandPath(), cmd.CommandPath())
			}
			ref, err := parseConfigRef(k.collection, arg, tenant)
			if err != nil {
				return err
			}
			for _, f := range set {
				if err := f.set(m, fieldInput[M]{parent: ref.Parent}); err != nil {
					return err
				}
			}
			return k.kind().one(cmd, g, func(ctx context.Context, c ipamv1.AnnouncementServiceClient) (M, error) {
				return k.create(ctx, c, ref.Parent, ref.ID, m, requestID, validateOnly)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "", "`TENANT` of the "+k.noun+" (required unless ID is a full name)")
	fs.StringVarP(&file, "file", "f", "", "read the "+k.noun+" as protobuf JSON from `FILE` (\"-\" for standard input); flags override its fields")
	fields = k.fields(g, fs, false)
	fs.StringVar(&requestID, "request-id", "", "`ID` that makes retries safe: a repeat within a day returns the first result")
	fs.BoolVar(&validateOnly, "validate-only", false, "check the request without creating the "+k.noun)
	return cmd
}

const createFileHelp = `

With -f FILE the resource is read as protobuf JSON (what get -o json
prints; output-only fields are ignored) and flags that are set replace the
fields they set. Without an ID argument, the name in the file is used.`

func (k *configKind[M]) getCommand(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get ID --tenant TENANT",
		Short: "Show a " + k.noun,
		Long: fmt.Sprintf(`Show a %s, named by its ID with --tenant or by its full name
"tenants/TENANT/%s/ID".`, k.noun, k.collection),
		Example: fmt.Sprintf("  beaconctl %s get %s --tenant acme\n  beaconctl %s get tenants/acme/%s/%s -o json",
			k.use, k.sampleID, k.use, k.collection, k.sampleID),
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseConfigRef(k.collection, args[0], tenant)
			if err != nil {
				return err
			}
			return k.kind().one(cmd, g, func(ctx context.Context, c ipamv1.AnnouncementServiceClient) (M, error) {
				return k.get(ctx, c, ref.Name)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "`TENANT` of the "+k.noun+" (required unless ID is a full name)")
	return cmd
}

func (k *configKind[M]) listCommand(g *globals) *cobra.Command {
	var (
		tenant string
		pages  pageFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List " + k.plural,
		Long:  fmt.Sprintf("List %s in name order, of one tenant or of every tenant.", k.plural),
		Example: fmt.Sprintf("  beaconctl %s list\n  beaconctl %s list --tenant acme -o json\n  beaconctl %s list -o name",
			k.use, k.use, k.use),
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			parent, err := tenantParent(tenant)
			if err != nil {
				return err
			}
			return k.kind().list(cmd, g, &pages, func(ctx context.Context, c ipamv1.AnnouncementServiceClient, token string) ([]M, string, error) {
				return k.list(ctx, c, parent, pages.size, token)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "-", "`TENANT` whose "+k.plural+" to list; \"-\" for every tenant")
	pages.register(fs, k.plural)
	return cmd
}

// setStringField sets a string field of m by name.
func setStringField(m proto.Message, name, value string) {
	r := m.ProtoReflect()
	r.Set(r.Descriptor().Fields().ByName(protoreflect.Name(name)), protoreflect.ValueOfString(value))
}

func (k *configKind[M]) updateCommand(g *globals) *cobra.Command {
	var (
		tenant       string
		etag         string
		requestID    string
		validateOnly bool
		fields       []field[M]
	)
	cmd := &cobra.Command{
		Use:     "update ID --tenant TENANT [flags]",
		Short:   "Change a " + k.noun,
		Long:    k.updateLong,
		Example: k.updateExample,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseConfigRef(k.collection, args[0], tenant)
			if err != nil {
				return err
			}
			set := changedFields(cmd.Flags(), fields)
			if len(set) == 0 {
				var names []string
				for _, f := range fields {
					names = append(names, "--"+f.flags[0])
				}
				return fmt.Errorf("nothing to update: set at least one of %s", strings.Join(names, ", "))
			}
			build := func(current M) (M, []string, error) {
				m := k.newMsg()
				var paths []string
				for _, f := range set {
					if err := f.set(m, fieldInput[M]{parent: ref.Parent, current: current}); err != nil {
						return m, nil, err
					}
					if !slices.Contains(paths, f.path) {
						paths = append(paths, f.path)
					}
				}
				return m, paths, nil
			}
			var current M
			// Fail on a bad flag before reading anything.
			m, paths, err := build(current)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(set, func(f field[M]) bool { return f.needsCurrent }) {
				current, err = callOnce(cmd.Context(), g, ipamv1.NewAnnouncementServiceClient, func(ctx context.Context, c ipamv1.AnnouncementServiceClient) (M, error) {
					return k.get(ctx, c, ref.Name)
				})
				if err != nil {
					return err
				}
				if m, paths, err = build(current); err != nil {
					return err
				}
				// A change computed from the resource as read must not
				// overwrite a change made since.
				if etag == "" {
					etag = current.GetEtag()
				}
			}
			setStringField(m, "name", ref.Name)
			setStringField(m, "etag", etag)
			return k.kind().one(cmd, g, func(ctx context.Context, c ipamv1.AnnouncementServiceClient) (M, error) {
				return k.update(ctx, c, m, &fieldmaskpb.FieldMask{Paths: paths}, requestID, validateOnly)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "", "`TENANT` of the "+k.noun+" (required unless ID is a full name)")
	fields = k.fields(g, fs, true)
	fs.StringVar(&etag, "etag", "", "fail with Aborted unless the "+k.noun+" still has this `ETAG`")
	fs.StringVar(&requestID, "request-id", "", "`ID` that makes retries safe")
	fs.BoolVar(&validateOnly, "validate-only", false, "check the request without changing the "+k.noun)
	return cmd
}

// updateHelp is the part of every update command's help about flags.
const updateHelp = `Only the fields whose flags are set change; the update_mask names them.
A list flag replaces the whole list: give every value, or "" to clear it
(--node-selector ""). --etag makes the update conditional on the resource
being unchanged since that etag.`

func (k *configKind[M]) deleteCommand(g *globals) *cobra.Command {
	var tenant, etag, requestID string
	cmd := &cobra.Command{
		Use:   "delete ID --tenant TENANT",
		Short: "Delete a " + k.noun,
		Example: fmt.Sprintf("  beaconctl %s delete %s --tenant acme\n  beaconctl %s delete tenants/acme/%s/%s --etag \"$ETAG\"",
			k.use, k.sampleID, k.use, k.collection, k.sampleID),
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseConfigRef(k.collection, args[0], tenant)
			if err != nil {
				return err
			}
			return k.kind().remove(cmd, g, ref.Name, func(ctx context.Context, c ipamv1.AnnouncementServiceClient) (proto.Message, error) {
				return k.delete(ctx, c, ref.Name, etag, requestID)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "", "`TENANT` of the "+k.noun+" (required unless ID is a full name)")
	return etagFlags(cmd, "the "+k.noun, &etag, &requestID)
}

// usage picks a flag's help for create or for update.
func usage(update bool, create, upd string) string {
	if update {
		return upd
	}
	return create
}
