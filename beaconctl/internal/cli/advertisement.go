package cli

import (
	"context"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// poolNames turns pool names given short or long into "pools/NAME".
func poolNames(vals []string) ([]string, error) {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		n, err := poolName(v)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// selectorHelp explains the selector flags, for the advertisements' and
// peers' help.
const selectorHelp = `Selector flags take KEY=VALUE[,KEY=VALUE...]: one label selector per flag,
which matches when every pair does; an object is selected when any one of
the selectors matches it. Set-based expressions (in, notin, exists) are
not flags: write them in a -f file.`

// adFlags are the flags the two advertisement kinds share.
type adFlags struct {
	pools, poolSelectors, nodeSelectors, ownerSelectors []string
}

func (a *adFlags) register(fs *pflag.FlagSet, update bool) {
	fs.StringSliceVar(&a.pools, "pool", nil, usage(update,
		"announce addresses of `POOL` (repeatable; with no --pool and no --pool-selector: every pool)",
		"replace the announced pools with `POOL`s (repeatable; \"\" clears: with no pool selectors either, every pool)"))
	fs.StringArrayVar(&a.poolSelectors, "pool-selector", nil, usage(update,
		"announce pools whose labels match `SELECTOR`, KEY=VALUE[,KEY=VALUE...] (repeatable)",
		"replace the pool selectors with `SELECTOR`s, KEY=VALUE[,KEY=VALUE...] (repeatable; \"\" clears)"))
	fs.StringArrayVar(&a.nodeSelectors, "node-selector", nil, usage(update,
		"announce from nodes whose labels match `SELECTOR`, KEY=VALUE[,KEY=VALUE...] (repeatable; default: every node)",
		"replace the node selectors with `SELECTOR`s, KEY=VALUE[,KEY=VALUE...] (repeatable; \"\" for every node)"))
	fs.StringArrayVar(&a.ownerSelectors, "owner-selector", nil, usage(update,
		"announce only allocations whose owner labels match `SELECTOR`, KEY=VALUE[,KEY=VALUE...] (repeatable; default: all)",
		"replace the owner selectors with `SELECTOR`s, KEY=VALUE[,KEY=VALUE...] (repeatable; \"\" for all owners)"))
}

func l2AdvKind() *configKind[*ipamv1.L2Advertisement] {
	return &configKind[*ipamv1.L2Advertisement]{
		use:        "l2adv",
		aliases:    []string{"l2advs", "l2advertisement", "l2advertisements"},
		noun:       "L2 advertisement",
		plural:     "L2 advertisements",
		collection: "l2Advertisements",
		sampleID:   "web",
		short:      "Manage L2 advertisements: addresses answered for with ARP and NDP",
		long: `Manage L2 advertisements. An L2 advertisement announces the addresses of
the pools it selects on the local link, with ARP (IPv4) and NDP (IPv6),
from one of the nodes it selects at a time, as MetalLB's L2Advertisement.

An L2 advertisement belongs to a tenant and is named
"tenants/TENANT/l2Advertisements/ID"; commands take the ID with --tenant,
or the full name. In tables, "*" stands for every pool, node or interface.`,
		example: `  beaconctl l2adv create web --tenant acme --pool web --interface eth0
  beaconctl l2adv list --tenant acme
  beaconctl l2adv update web --tenant acme --node-selector zone=a --node-selector zone=b
  beaconctl l2adv delete web --tenant acme`,
		createLong: `Create an L2 advertisement named ID in --tenant.

The pools are chosen by name with --pool and by label with --pool-selector;
with neither, every pool is announced. --node-selector limits the nodes
that may announce, --interface the interfaces they answer on, and
--owner-selector the allocations announced, by the owner's labels.
--node-priority PRIORITY:KEY=VALUE[,...] prefers nodes in tiers: the
lowest PRIORITY that has a live, selected node announces.

` + selectorHelp,
		createExample: `  # Announce pool web from every node, on every interface.
  beaconctl l2adv create web --tenant acme --pool web

  # Announce prod pools from the edge nodes of zone a or b, on eth0, rack 1 first.
  beaconctl l2adv create prod --tenant acme --pool-selector env=prod \
      --node-selector role=edge,zone=a --node-selector role=edge,zone=b \
      --interface eth0 --node-priority 1:rack=r1 --node-priority 2:rack=r2

  # From a file, as written by get -o json.
  beaconctl l2adv create -f web.json --tenant acme`,
		updateLong: `Change the fields of an L2 advertisement named by the flags that are set.

` + updateHelp + `

` + selectorHelp,
		updateExample: `  beaconctl l2adv update web --tenant acme --pool web --pool web2
  beaconctl l2adv update web --tenant acme --interface "" --node-priority ""
  beaconctl l2adv update tenants/acme/l2Advertisements/web --node-selector zone=a --etag "$ETAG"`,
		newMsg: func() *ipamv1.L2Advertisement { return &ipamv1.L2Advertisement{} },
		fields: l2AdvFields,
		table:  output.L2AdvertisementTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.L2Advertisement, requestID string, validateOnly bool) (*ipamv1.L2Advertisement, error) {
			resp, err := c.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{
				Parent: parent, L2AdvertisementId: id, L2Advertisement: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetL2Advertisement(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.L2Advertisement, error) {
			resp, err := c.GetL2Advertisement(ctx, &ipamv1.GetL2AdvertisementRequest{Name: name})
			return resp.GetL2Advertisement(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.L2Advertisement, string, error) {
			resp, err := c.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetL2Advertisements(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.L2Advertisement, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.L2Advertisement, error) {
			resp, err := c.UpdateL2Advertisement(ctx, &ipamv1.UpdateL2AdvertisementRequest{
				L2Advertisement: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetL2Advertisement(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteL2Advertisement(ctx, &ipamv1.DeleteL2AdvertisementRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

func l2AdvFields(_ *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.L2Advertisement] {
	var (
		ad         adFlags
		interfaces []string
		priorities []string
	)
	ad.register(fs, update)
	fs.StringSliceVar(&interfaces, "interface", nil, usage(update,
		"answer on `INTERFACE` only (repeatable; default: every interface of the node)",
		"replace the interfaces with `INTERFACE`s (repeatable; \"\" for every interface)"))
	fs.StringArrayVar(&priorities, "node-priority", nil, usage(update,
		"prefer the nodes of `TIER`, PRIORITY:KEY=VALUE[,KEY=VALUE...], lower PRIORITY first (repeatable)",
		"replace the node priorities with `TIER`s, PRIORITY:KEY=VALUE[,KEY=VALUE...] (repeatable; \"\" for none)"))
	type m = *ipamv1.L2Advertisement
	type in = fieldInput[m]
	return []field[m]{
		{flags: []string{"pool"}, path: "pools", set: func(a m, _ in) (err error) {
			a.Pools, err = poolNames(ad.pools)
			return err
		}},
		{flags: []string{"pool-selector"}, path: "pool_selectors", set: func(a m, _ in) (err error) {
			a.PoolSelectors, err = parseSelectors("pool-selector", ad.poolSelectors)
			return err
		}},
		{flags: []string{"node-selector"}, path: "node_selectors", set: func(a m, _ in) (err error) {
			a.NodeSelectors, err = parseSelectors("node-selector", ad.nodeSelectors)
			return err
		}},
		{flags: []string{"interface"}, path: "interfaces", set: func(a m, _ in) error {
			a.Interfaces = interfaces
			return nil
		}},
		{flags: []string{"owner-selector"}, path: "owner_selectors", set: func(a m, _ in) (err error) {
			a.OwnerSelectors, err = parseSelectors("owner-selector", ad.ownerSelectors)
			return err
		}},
		{flags: []string{"node-priority"}, path: "node_priorities", set: func(a m, _ in) (err error) {
			a.NodePriorities, err = parseNodePriorities("node-priority", priorities)
			return err
		}},
	}
}

func bgpAdvKind() *configKind[*ipamv1.BGPAdvertisement] {
	return &configKind[*ipamv1.BGPAdvertisement]{
		use:        "bgpadv",
		aliases:    []string{"bgpadvs", "bgpadvertisement", "bgpadvertisements"},
		noun:       "BGP advertisement",
		plural:     "BGP advertisements",
		collection: "bgpAdvertisements",
		sampleID:   "web",
		short:      "Manage BGP advertisements: addresses announced to BGP peers",
		long: `Manage BGP advertisements. A BGP advertisement announces the addresses of
the pools it selects to BGP peers, from the nodes it selects, with
communities, LOCAL_PREF and aggregation, as MetalLB's BGPAdvertisement.

A BGP advertisement belongs to a tenant and is named
"tenants/TENANT/bgpAdvertisements/ID"; commands take the ID with --tenant,
or the full name. In tables, "*" stands for every pool or peer and AGG is
the IPv4/IPv6 aggregation length.`,
		example: `  beaconctl bgpadv create web --tenant acme --pool web --peer tor1 --community 65000:100
  beaconctl bgpadv list --tenant acme
  beaconctl bgpadv update web --tenant acme --local-pref 200
  beaconctl bgpadv delete web --tenant acme`,
		createLong: `Create a BGP advertisement named ID in --tenant.

The pools are chosen by name with --pool and by label with --pool-selector;
with neither, every pool is announced. --peer limits the peers announced to
(by BGP peer ID; default: every peer), --node-selector the nodes that
announce and --owner-selector the allocations announced, by the owner's
labels. --community takes "A:B", "large:A:B:C" or the name of an alias
defined with 'beaconctl community'. --local-pref sets LOCAL_PREF towards
iBGP peers. --aggregation-length and --aggregation-length-v6 announce
prefixes of that length instead of single addresses (default 32 and 128).

` + selectorHelp,
		createExample: `  # Announce pool web to every peer.
  beaconctl bgpadv create web --tenant acme --pool web

  # Announce prod pools to two peers as /24s, tagged, preferred inside the AS.
  beaconctl bgpadv create prod --tenant acme --pool-selector env=prod \
      --peer tor1 --peer tor2 --community 65000:100 --community large:65000:1:2 \
      --local-pref 200 --aggregation-length 24 --node-selector role=edge`,
		updateLong: `Change the fields of a BGP advertisement named by the flags that are set.

` + updateHelp + ` --local-pref 0 removes LOCAL_PREF and --aggregation-length 0
restores the default.

` + selectorHelp,
		updateExample: `  beaconctl bgpadv update web --tenant acme --peer tor1 --peer tor2
  beaconctl bgpadv update web --tenant acme --community "" --local-pref 0
  beaconctl bgpadv update tenants/acme/bgpAdvertisements/web --aggregation-length-v6 64 --etag "$ETAG"`,
		newMsg: func() *ipamv1.BGPAdvertisement { return &ipamv1.BGPAdvertisement{} },
		fields: bgpAdvFields,
		table:  output.BGPAdvertisementTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.BGPAdvertisement, requestID string, validateOnly bool) (*ipamv1.BGPAdvertisement, error) {
			resp, err := c.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{
				Parent: parent, BgpAdvertisementId: id, BgpAdvertisement: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBgpAdvertisement(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.BGPAdvertisement, error) {
			resp, err := c.GetBGPAdvertisement(ctx, &ipamv1.GetBGPAdvertisementRequest{Name: name})
			return resp.GetBgpAdvertisement(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.BGPAdvertisement, string, error) {
			resp, err := c.ListBGPAdvertisements(ctx, &ipamv1.ListBGPAdvertisementsRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetBgpAdvertisements(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.BGPAdvertisement, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.BGPAdvertisement, error) {
			resp, err := c.UpdateBGPAdvertisement(ctx, &ipamv1.UpdateBGPAdvertisementRequest{
				BgpAdvertisement: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBgpAdvertisement(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteBGPAdvertisement(ctx, &ipamv1.DeleteBGPAdvertisementRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

func bgpAdvFields(_ *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.BGPAdvertisement] {
	var (
		ad          adFlags
		peers       []string
		communities []string
		localPref   uint32
		agg, agg6   int32
	)
	ad.register(fs, update)
	fs.StringSliceVar(&peers, "peer", nil, usage(update,
		"announce to the BGP peer `ID` only (repeatable; default: every peer)",
		"replace the peers with `ID`s (repeatable; \"\" for every peer)"))
	fs.StringSliceVar(&communities, "community", nil, usage(update,
		"tag routes with `COMMUNITY`: A:B, large:A:B:C or an alias (repeatable)",
		"replace the communities with `COMMUNITY`s (repeatable; \"\" for none)"))
	fs.Uint32Var(&localPref, "local-pref", 0, usage(update,
		"LOCAL_PREF `N` for iBGP peers (default: not set)",
		"new LOCAL_PREF `N` for iBGP peers; 0 removes it"))
	fs.Int32Var(&agg, "aggregation-length", 0, usage(update,
		"announce IPv4 prefixes of `LENGTH` bits (default 32)",
		"new IPv4 prefix `LENGTH`; 0 for the default, 32"))
	fs.Int32Var(&agg6, "aggregation-length-v6", 0, usage(update,
		"announce IPv6 prefixes of `LENGTH` bits (default 128)",
		"new IPv6 prefix `LENGTH`; 0 for the default, 128"))
	type m = *ipamv1.BGPAdvertisement
	type in = fieldInput[m]
	return []field[m]{
		{flags: []string{"pool"}, path: "pools", set: func(a m, _ in) (err error) {
			a.Pools, err = poolNames(ad.pools)
			return err
		}},
		{flags: []string{"pool-selector"}, path: "pool_selectors", set: func(a m, _ in) (err error) {
			a.PoolSelectors, err = parseSelectors("pool-selector", ad.poolSelectors)
			return err
		}},
		{flags: []string{"node-selector"}, path: "node_selectors", set: func(a m, _ in) (err error) {
			a.NodeSelectors, err = parseSelectors("node-selector", ad.nodeSelectors)
			return err
		}},
		{flags: []string{"peer"}, path: "peers", set: func(a m, x in) (err error) {
			a.Peers, err = configIDs("peer", "bgpPeers", x.parent, peers)
			return err
		}},
		{flags: []string{"community"}, path: "communities", set: func(a m, _ in) error {
			a.Communities = communities
			return nil
		}},
		{flags: []string{"local-pref"}, path: "local_pref", set: func(a m, _ in) error {
			a.LocalPref = localPref
			return nil
		}},
		{flags: []string{"aggregation-length"}, path: "aggregation_length", set: func(a m, _ in) error {
			a.AggregationLength = agg
			return nil
		}},
		{flags: []string{"aggregation-length-v6"}, path: "aggregation_length_v6", set: func(a m, _ in) error {
			a.AggregationLengthV6 = agg6
			return nil
		}},
		{flags: []string{"owner-selector"}, path: "owner_selectors", set: func(a m, _ in) (err error) {
			a.OwnerSelectors, err = parseSelectors("owner-selector", ad.ownerSelectors)
			return err
		}},
	}
}
