package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestParseConfigRef(t *testing.T) {
	const coll = "l2Advertisements"
	web := configRef{Name: "tenants/acme/l2Advertisements/web", Parent: "tenants/acme", ID: "web"}
	tests := []struct {
		arg, tenant string
		want        configRef
		wantErr     string
	}{
		{arg: "web", tenant: "acme", want: web},
		{arg: "web", tenant: "tenants/acme", want: web},
		{arg: web.Name, want: web},
		{arg: web.Name, tenant: "acme", want: web},
		{arg: web.Name, tenant: "lab", wantErr: "is not in --tenant lab"},
		{arg: "web", wantErr: "--tenant is required"},
		{arg: "web", tenant: "-", wantErr: "cannot name one resource"},
		{arg: "web", tenant: "a/b", wantErr: "invalid tenant"},
		{arg: "tenants/acme/bgpPeers/web", wantErr: "not a name of the form tenants/TENANT/l2Advertisements/ID"},
		{arg: "tenants/-/l2Advertisements/web", wantErr: "not a name"},
		{arg: "tenants/acme/l2Advertisements/", wantErr: "not a name"},
		{arg: "tenants/acme/l2Advertisements/web/x", wantErr: "not a name"},
		{arg: "a/b", tenant: "acme", wantErr: `invalid ID "a/b"`},
		{arg: "", tenant: "acme", wantErr: "invalid ID"},
	}
	for _, tt := range tests {
		got, err := parseConfigRef(coll, tt.arg, tt.tenant)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseConfigRef(%q, %q): error %v, want one containing %q", tt.arg, tt.tenant, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseConfigRef(%q, %q): %v", tt.arg, tt.tenant, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseConfigRef(%q, %q) (-want +got):\n%s", tt.arg, tt.tenant, diff)
		}
	}
}

func TestConfigIDs(t *testing.T) {
	got, err := configIDs("peer", "bgpPeers", "tenants/acme", []string{"tor1", "tenants/acme/bgpPeers/tor2"})
	if err != nil || !cmp.Equal(got, []string{"tor1", "tor2"}) {
		t.Errorf("configIDs = %v, %v; want [tor1 tor2]", got, err)
	}
	for _, bad := range []string{"tenants/lab/bgpPeers/tor1", "tenants/acme/bfdProfiles/fast", "a/b"} {
		if _, err := configIDs("peer", "bgpPeers", "tenants/acme", []string{bad}); err == nil || !strings.HasPrefix(err.Error(), "--peer") {
			t.Errorf("configIDs(%q): error %v, want a --peer error", bad, err)
		}
	}
}

func sel(kv ...string) *ipamv1.LabelSelector {
	s := &ipamv1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// configCase is one run of a config command and the requests it must send.
type configCase struct {
	name string
	// args: FILE stands for file's path, ETAG for the etag of the
	// resource named etagOf.
	args []string
	// file, if set, is written to a temporary file that "FILE" in args
	// stands for.
	file    string
	stdin   string
	etagOf  string
	want    []proto.Message
	wantErr string
}

// runConfigCases runs each case against one real IPAM, its announcement
// config emptied and seeded anew before each.
func runConfigCases(t *testing.T, seed func(*testIPAM), tests []configCase) {
	t.Helper()
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &testIPAM{t: t, addr: ipam.addr, conn: ipam.conn}
			e.resetConfig("acme")
			e.resetConfig("lab")
			if seed != nil {
				seed(e)
			}
			etag := ""
			if tt.etagOf != "" {
				etag = e.configEtag(tt.etagOf)
			}
			args, want := fill(tt.args, tt.want, etag)
			f, addr := e.record(t)
			args = append([]string{"--plaintext", "--server", addr}, args...)
			if tt.file != "" {
				path := filepath.Join(t.TempDir(), "resource.json")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
				for i, a := range args {
					if a == "FILE" {
						args[i] = path
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := runStdin(ctx, nil, strings.NewReader(tt.stdin), args...)
			checkRequests(t, f, res, tt.wantErr, want)
		})
	}
}

func TestConfigCreateRequests(t *testing.T) {
	l2 := func(id string, a *ipamv1.L2Advertisement) *ipamv1.CreateL2AdvertisementRequest {
		return &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/acme", L2AdvertisementId: id, L2Advertisement: a}
	}
	peer := func(p *ipamv1.BGPPeer) []proto.Message {
		return []proto.Message{&ipamv1.CreateBGPPeerRequest{Parent: "tenants/acme", BgpPeerId: "tor1", BgpPeer: p}}
	}
	runConfigCases(t, nil, []configCase{
		{
			name: "l2 minimal",
			args: []string{"l2adv", "create", "web", "--tenant", "acme"},
			want: []proto.Message{l2("web", &ipamv1.L2Advertisement{})},
		},
		{
			name: "l2 every flag",
			args: []string{
				"l2adv", "create", "prod", "--tenant", "tenants/acme",
				"--pool", "web", "--pool", "pools/db,edge", "--pool-selector", "env=prod",
				"--node-selector", "role=edge,zone=a", "--node-selector", "zone = b",
				"--interface", "eth0,eth1", "--owner-selector", "app=web,tier=",
				"--node-priority", "1:rack=r1", "--node-priority", "2:",
				"--request-id", "r1", "--validate-only",
			},
			want: []proto.Message{&ipamv1.CreateL2AdvertisementRequest{
				Parent:            "tenants/acme",
				L2AdvertisementId: "prod",
				L2Advertisement: &ipamv1.L2Advertisement{
					Pools:          []string{"pools/web", "pools/db", "pools/edge"},
					PoolSelectors:  []*ipamv1.LabelSelector{sel("env", "prod")},
					NodeSelectors:  []*ipamv1.LabelSelector{sel("role", "edge", "zone", "a"), sel("zone", "b")},
					Interfaces:     []string{"eth0", "eth1"},
					OwnerSelectors: []*ipamv1.LabelSelector{sel("app", "web", "tier", "")},
					NodePriorities: []*ipamv1.NodePriority{
						{Priority: 1, NodeSelector: sel("rack", "r1")},
						{Priority: 2, NodeSelector: &ipamv1.LabelSelector{}},
					},
				},
				RequestId:    "r1",
				ValidateOnly: true,
			}},
		},
		{
			name: "l2 by full name",
			args: []string{"l2adv", "create", "tenants/lab/l2Advertisements/x"},
			want: []proto.Message{&ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/lab", L2AdvertisementId: "x", L2Advertisement: &ipamv1.L2Advertisement{}}},
		},
		{name: "no tenant", args: []string{"l2adv", "create", "web"}, wantErr: "--tenant is required"},
		{name: "every tenant", args: []string{"l2adv", "create", "web", "--tenant", "-"}, wantErr: "cannot name one resource"},
		{name: "no ID", args: []string{"l2adv", "create", "--tenant", "acme"}, wantErr: "missing ID"},
		{name: "two IDs", args: []string{"l2adv", "create", "a", "b", "--tenant", "acme"}, wantErr: `unexpected argument "b"`},
		{name: "selector without value", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--node-selector", "zone"}, wantErr: `--node-selector "zone": want KEY=VALUE`},
		{name: "selector with a key twice", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--pool-selector", "a=1,a=2"}, wantErr: "label a given twice"},
		{name: "empty selector among others", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--node-selector", "zone=a", "--node-selector", ""}, wantErr: `--node-selector ""`},
		{name: "priority not a number", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--node-priority", "x:zone=a"}, wantErr: "want PRIORITY:KEY=VALUE"},
		{name: "negative priority", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--node-priority", "-1:zone=a"}, wantErr: "PRIORITY 0 or more"},
		{name: "priority without colon", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--node-priority", "1"}, wantErr: "want PRIORITY:KEY=VALUE"},
		{name: "bad pool", args: []string{"l2adv", "create", "web", "--tenant", "acme", "--pool", "a/b"}, wantErr: `invalid pool name "a/b"`},
		{
			name: "bgp every flag",
			args: []string{
				"bgpadv", "create", "prod", "--tenant", "acme", "--pool", "web", "--pool-selector", "env=prod",
				"--node-selector", "role=edge", "--peer", "tor1", "--peer", "tenants/acme/bgpPeers/tor2",
				"--community", "65000:100,large:1:2:3", "--community", "tags", "--local-pref", "200",
				"--aggregation-length", "24", "--aggregation-length-v6", "64", "--owner-selector", "app=web",
			},
			want: []proto.Message{&ipamv1.CreateBGPAdvertisementRequest{
				Parent:             "tenants/acme",
				BgpAdvertisementId: "prod",
				BgpAdvertisement: &ipamv1.BGPAdvertisement{
					Pools:               []string{"pools/web"},
					PoolSelectors:       []*ipamv1.LabelSelector{sel("env", "prod")},
					NodeSelectors:       []*ipamv1.LabelSelector{sel("role", "edge")},
					Peers:               []string{"tor1", "tor2"},
					Communities:         []string{"65000:100", "large:1:2:3", "tags"},
					LocalPref:           200,
					AggregationLength:   24,
					AggregationLengthV6: 64,
					OwnerSelectors:      []*ipamv1.LabelSelector{sel("app", "web")},
				},
			}},
		},
		{name: "bgp peer of another tenant", args: []string{"bgpadv", "create", "x", "--tenant", "acme", "--peer", "tenants/lab/bgpPeers/tor1"}, wantErr: "references stay within a tenant"},
		{
			name: "peer every flag",
			args: []string{
				"peer", "create", "tor1", "--tenant", "acme", "--my-asn", "4200000000", "--peer-asn", "64500",
				"--peer-address", "2001:db8::1", "--peer-port", "1179", "--source-address", "2001:db8::10",
				"--router-id", "192.0.2.10", "--hold-time", "30s", "--keepalive-time", "10s", "--connect-time", "5s",
				"--password", "s3cret", "--ebgp-multihop", "--graceful-restart", "--node-selector", "rack=r1",
				"--bfd-profile", "tenants/acme/bfdProfiles/fast",
			},
			want: peer(&ipamv1.BGPPeer{
				MyAsn: 4200000000, PeerAsn: 64500, PeerAddress: "2001:db8::1", PeerPort: 1179,
				SourceAddress: "2001:db8::10", RouterId: "192.0.2.10",
				HoldTime: durationpb.New(30 * time.Second), KeepaliveTime: durationpb.New(10 * time.Second), ConnectTime: durationpb.New(5 * time.Second),
				Password: "s3cret", EbgpMultihop: true, GracefulRestart: true,
				NodeSelectors: []*ipamv1.LabelSelector{sel("rack", "r1")}, BfdProfile: "fast",
			}),
		},
		{
			name:    "peer password file",
			args:    []string{"peer", "create", "tor1", "--tenant", "acme", "--password-file", "/etc/beacon/tor1.secret", "--hold-time", "0"},
			want:    peer(&ipamv1.BGPPeer{PasswordFile: "/etc/beacon/tor1.secret"}),
			wantErr: "bgp_peer.my_asn: is required", // the request is what counts here
		},
		{
			name:    "peer password from stdin",
			args:    []string{"peer", "create", "tor1", "--tenant", "acme", "--password-stdin"},
			stdin:   "s3cret pass\r\nsecond line\n",
			want:    peer(&ipamv1.BGPPeer{Password: "s3cret pass"}),
			wantErr: "bgp_peer.my_asn: is required",
		},
		{name: "peer empty stdin", args: []string{"peer", "create", "tor1", "--tenant", "acme", "--password-stdin"}, wantErr: "standard input holds no password"},
		{name: "peer two passwords", args: []string{"peer", "create", "tor1", "--tenant", "acme", "--password", "a", "--password-stdin"}, stdin: "b\n", wantErr: "not both"},
		{name: "peer negative hold time", args: []string{"peer", "create", "tor1", "--tenant", "acme", "--hold-time", "-3s"}, wantErr: "--hold-time must not be negative"},
		{name: "peer port out of range", args: []string{"peer", "create", "tor1", "--tenant", "acme", "--peer-port", "70000"}, wantErr: `invalid argument "70000"`},
		{
			name: "bfd every flag",
			args: []string{
				"bfd", "create", "fast", "--tenant", "acme", "--receive-interval", "50ms", "--transmit-interval", "100ms",
				"--detect-multiplier", "5", "--echo-mode", "--echo-interval", "20ms", "--passive-mode", "--minimum-ttl", "250",
			},
			want: []proto.Message{&ipamv1.CreateBFDProfileRequest{Parent: "tenants/acme", BfdProfileId: "fast", BfdProfile: &ipamv1.BFDProfile{
				ReceiveInterval: durationpb.New(50 * time.Millisecond), TransmitInterval: durationpb.New(100 * time.Millisecond),
				DetectMultiplier: 5, EchoMode: true, EchoInterval: durationpb.New(20 * time.Millisecond), PassiveMode: true, MinimumTtl: 250,
			}}},
		},
		{
			name: "community aliases in order, a repeat overrides",
			args: []string{"community", "create", "tags", "--tenant", "acme", "--alias", "b=65000:1", "--alias", "a=large:1:2:3", "--alias", "b=65000:2"},
			want: []proto.Message{&ipamv1.CreateCommunityRequest{Parent: "tenants/acme", CommunityId: "tags", Community: &ipamv1.Community{
				Aliases: []*ipamv1.CommunityAlias{{Name: "b", Value: "65000:2"}, {Name: "a", Value: "large:1:2:3"}},
			}}},
		},
		{name: "community removal on create", args: []string{"community", "create", "tags", "--tenant", "acme", "--alias", "a-"}, wantErr: `--alias "a-": want NAME=VALUE`},
		{name: "community alias without value", args: []string{"community", "create", "tags", "--tenant", "acme", "--alias", "a="}, wantErr: "want NAME=VALUE"},
		{
			name: "file gives the name",
			args: []string{"l2adv", "create", "-f", "FILE"},
			file: `{"name": "tenants/acme/l2Advertisements/web", "pools": ["pools/web"], "etag": "7"}`,
			want: []proto.Message{l2("web", &ipamv1.L2Advertisement{Name: "tenants/acme/l2Advertisements/web", Pools: []string{"pools/web"}, Etag: "7"})},
		},
		{
			name: "flags override the file",
			args: []string{"l2adv", "create", "web", "--tenant", "acme", "-f", "FILE", "--pool", "db"},
			file: `{"pools": ["pools/web"], "interfaces": ["eth0"]}`,
			want: []proto.Message{l2("web", &ipamv1.L2Advertisement{Pools: []string{"pools/db"}, Interfaces: []string{"eth0"}})},
		},
		{
			name: "the argument wins over the file's name",
			args: []string{"l2adv", "create", "copy", "--tenant", "lab", "--file", "FILE"},
			file: `{"name": "tenants/acme/l2Advertisements/web"}`,
			want: []proto.Message{&ipamv1.CreateL2AdvertisementRequest{
				Parent: "tenants/lab", L2AdvertisementId: "copy",
				L2Advertisement: &ipamv1.L2Advertisement{Name: "tenants/acme/l2Advertisements/web"},
			}},
		},
		{
			name:    "the file's name in another tenant",
			args:    []string{"l2adv", "create", "-f", "FILE", "--tenant", "lab"},
			file:    `{"name": "tenants/acme/l2Advertisements/web"}`,
			wantErr: "is not in --tenant lab",
		},
		{name: "file without a name", args: []string{"l2adv", "create", "-f", "FILE", "--tenant", "acme"}, file: `{}`, wantErr: "missing ID"},
		{name: "misspelt field", args: []string{"l2adv", "create", "web", "--tenant", "acme", "-f", "FILE"}, file: `{"pool": ["pools/web"]}`, wantErr: `unknown field "pool"`},
		{name: "not JSON", args: []string{"bfd", "create", "x", "--tenant", "acme", "-f", "FILE"}, file: `receive_interval: 1s`, wantErr: "not a beacon.ipam.v1.BFDProfile as JSON"},
		{name: "missing file", args: []string{"bfd", "create", "x", "--tenant", "acme", "-f", "/nonexistent/x.json"}, wantErr: "reading -f"},
		{
			name:  "stdin, with an expression",
			args:  []string{"peer", "create", "tor1", "--tenant", "acme", "-f", "-"},
			stdin: `{"myAsn": 64512, "peerAsn": 64500, "peerAddress": "192.0.2.1", "holdTime": "30s", "nodeSelectors": [{"matchExpressions": [{"key": "zone", "operator": "OPERATOR_IN", "values": ["a", "b"]}]}]}`,
			want: peer(&ipamv1.BGPPeer{
				MyAsn: 64512, PeerAsn: 64500, PeerAddress: "192.0.2.1", HoldTime: durationpb.New(30 * time.Second),
				NodeSelectors: []*ipamv1.LabelSelector{{MatchExpressions: []*ipamv1.LabelSelectorRequirement{
					{Key: "zone", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_IN, Values: []string{"a", "b"}},
				}}},
			}),
		},
		{name: "stdin read twice", args: []string{"peer", "create", "tor1", "--tenant", "acme", "-f", "-", "--password-stdin"}, stdin: "{}", wantErr: "-f - and --password-stdin cannot both read standard input"},
		{
			name:    "stdin file and inline password",
			args:    []string{"peer", "create", "tor1", "--tenant", "acme", "-f", "-", "--password", "pw"},
			stdin:   `{"peerAsn": 64500}`,
			want:    peer(&ipamv1.BGPPeer{PeerAsn: 64500, Password: "pw"}),
			wantErr: "bgp_peer.my_asn: is required",
		},
	})
}

// seedConfigs stores one resource of each kind in tenant acme.
func seedConfigs(e *testIPAM) {
	t := e.t
	t.Helper()
	c := ipamv1.NewAnnouncementServiceClient(e.conn)
	ctx := e.ctx()
	const parent = "tenants/acme"
	if _, err := c.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: parent, L2AdvertisementId: "web", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/web"}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := c.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: parent, BgpAdvertisementId: "web", BgpAdvertisement: &ipamv1.BGPAdvertisement{Pools: []string{"pools/web"}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := c.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: parent, BgpPeerId: "tor1", BgpPeer: &ipamv1.BGPPeer{MyAsn: 64512, PeerAsn: 64500, PeerAddress: "198.51.100.1", Password: "old"}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := c.CreateBFDProfile(ctx, &ipamv1.CreateBFDProfileRequest{Parent: parent, BfdProfileId: "fast", BfdProfile: &ipamv1.BFDProfile{DetectMultiplier: 5}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := c.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{Parent: parent, CommunityId: "tags", Community: &ipamv1.Community{Aliases: []*ipamv1.CommunityAlias{
		{Name: "a", Value: "65000:1"}, {Name: "b", Value: "65000:2"},
	}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := c.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: parent, NodeId: "worker-1.lab", Node: &ipamv1.Node{Labels: map[string]string{"zone": "a", "rack": "r1"}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
}

func TestConfigUpdateRequests(t *testing.T) {
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	const (
		l2Name   = "tenants/acme/l2Advertisements/web"
		bgpName  = "tenants/acme/bgpAdvertisements/web"
		peerName = "tenants/acme/bgpPeers/tor1"
		bfdName  = "tenants/acme/bfdProfiles/fast"
		tagsName = "tenants/acme/communities/tags"
	)
	getTags := &ipamv1.GetCommunityRequest{Name: tagsName}
	runConfigCases(t, seedConfigs, []configCase{
		{
			name: "l2 mask in field order, empty value clears",
			args: []string{"l2adv", "update", "web", "--tenant", "acme", "--interface", "", "--node-selector", "zone=a"},
			want: []proto.Message{&ipamv1.UpdateL2AdvertisementRequest{
				L2Advertisement: &ipamv1.L2Advertisement{Name: l2Name, NodeSelectors: []*ipamv1.LabelSelector{sel("zone", "a")}},
				UpdateMask:      mask("node_selectors", "interfaces"),
			}},
		},
		{
			name:   "l2 by full name with an etag",
			args:   []string{"l2adv", "update", l2Name, "--pool", "", "--pool-selector", "env=prod", "--owner-selector", "", "--node-priority", "", "--etag", placeholder, "--request-id", "r", "--validate-only"},
			etagOf: l2Name,
			want: []proto.Message{&ipamv1.UpdateL2AdvertisementRequest{
				L2Advertisement: &ipamv1.L2Advertisement{Name: l2Name, PoolSelectors: []*ipamv1.LabelSelector{sel("env", "prod")}, Etag: placeholder},
				UpdateMask:      mask("pools", "pool_selectors", "owner_selectors", "node_priorities"),
				RequestId:       "r",
				ValidateOnly:    true,
			}},
		},
		{
			name:    "l2 stale etag",
			args:    []string{"l2adv", "update", "web", "--tenant", "acme", "--interface", "eth0", "--etag", "e0"},
			want:    []proto.Message{&ipamv1.UpdateL2AdvertisementRequest{L2Advertisement: &ipamv1.L2Advertisement{Name: l2Name, Interfaces: []string{"eth0"}, Etag: "e0"}, UpdateMask: mask("interfaces")}},
			wantErr: "Aborted",
		},
		{
			name: "bgp zero values reset",
			args: []string{"bgpadv", "update", "web", "--tenant", "acme", "--local-pref", "0", "--aggregation-length", "0", "--peer", "", "--community", "", "--pool", "web"},
			want: []proto.Message{&ipamv1.UpdateBGPAdvertisementRequest{
				BgpAdvertisement: &ipamv1.BGPAdvertisement{Name: bgpName, Pools: []string{"pools/web"}},
				UpdateMask:       mask("pools", "peers", "communities", "local_pref", "aggregation_length"),
			}},
		},
		{
			name: "bgp every field",
			args: []string{
				"bgpadv", "update", "web", "--tenant", "acme", "--owner-selector", "app=web", "--aggregation-length-v6", "64",
				"--aggregation-length", "24", "--local-pref", "100", "--community", "tags", "--peer", "tor1",
				"--node-selector", "a=b", "--pool-selector", "env=prod", "--pool", "db",
			},
			want: []proto.Message{&ipamv1.UpdateBGPAdvertisementRequest{
				BgpAdvertisement: &ipamv1.BGPAdvertisement{
					Name: bgpName, Pools: []string{"pools/db"}, PoolSelectors: []*ipamv1.LabelSelector{sel("env", "prod")},
					NodeSelectors: []*ipamv1.LabelSelector{sel("a", "b")}, Peers: []string{"tor1"}, Communities: []string{"tags"},
					LocalPref: 100, AggregationLength: 24, AggregationLengthV6: 64, OwnerSelectors: []*ipamv1.LabelSelector{sel("app", "web")},
				},
				UpdateMask: mask("pools", "pool_selectors", "node_selectors", "peers", "communities", "local_pref", "aggregation_length", "aggregation_length_v6", "owner_selectors"),
			}},
		},
		{
			name: "peer switch to a password file",
			args: []string{"peer", "update", "tor1", "--tenant", "acme", "--password", "", "--password-file", "/etc/beacon/tor1.secret"},
			want: []proto.Message{&ipamv1.UpdateBGPPeerRequest{
				BgpPeer:    &ipamv1.BGPPeer{Name: peerName, PasswordFile: "/etc/beacon/tor1.secret"},
				UpdateMask: mask("password", "password_file"),
			}},
		},
		{
			name: "peer defaults and offs",
			args: []string{"peer", "update", "tor1", "--tenant", "acme", "--hold-time", "0", "--ebgp-multihop=false", "--bfd-profile", "", "--node-selector", ""},
			want: []proto.Message{&ipamv1.UpdateBGPPeerRequest{
				BgpPeer:    &ipamv1.BGPPeer{Name: peerName},
				UpdateMask: mask("hold_time", "ebgp_multihop", "node_selectors", "bfd_profile"),
			}},
		},
		{
			name:  "peer password from stdin",
			args:  []string{"peer", "update", peerName, "--password-stdin"},
			stdin: "n3w\n",
			want:  []proto.Message{&ipamv1.UpdateBGPPeerRequest{BgpPeer: &ipamv1.BGPPeer{Name: peerName, Password: "n3w"}, UpdateMask: mask("password")}},
		},
		{
			name: "peer every field",
			args: []string{
				"peer", "update", "tor1", "--tenant", "acme", "--bfd-profile", "fast", "--node-selector", "r=1", "--graceful-restart",
				"--ebgp-multihop", "--password-file", "", "--password", "p", "--connect-time", "1s", "--keepalive-time", "2s",
				"--hold-time", "6s", "--router-id", "198.51.100.9", "--source-address", "", "--peer-port", "0", "--peer-address", "198.51.100.2",
				"--peer-asn", "1", "--my-asn", "2",
			},
			want: []proto.Message{&ipamv1.UpdateBGPPeerRequest{
				BgpPeer: &ipamv1.BGPPeer{
					Name: peerName, MyAsn: 2, PeerAsn: 1, PeerAddress: "198.51.100.2", RouterId: "198.51.100.9",
					HoldTime: durationpb.New(6 * time.Second), KeepaliveTime: durationpb.New(2 * time.Second), ConnectTime: durationpb.New(time.Second),
					Password: "p", EbgpMultihop: true, GracefulRestart: true, NodeSelectors: []*ipamv1.LabelSelector{sel("r", "1")}, BfdProfile: "fast",
				},
				UpdateMask: mask("my_asn", "peer_asn", "peer_address", "peer_port", "source_address", "router_id", "hold_time", "keepalive_time",
					"connect_time", "password", "password_file", "ebgp_multihop", "graceful_restart", "node_selectors", "bfd_profile"),
			}},
		},
		{
			name: "bfd",
			args: []string{"bfd", "update", "fast", "--tenant", "acme", "--echo-mode=false", "--detect-multiplier", "0", "--receive-interval", "100ms", "--minimum-ttl", "254", "--passive-mode", "--echo-interval", "0", "--transmit-interval", "1s"},
			want: []proto.Message{&ipamv1.UpdateBFDProfileRequest{
				BfdProfile: &ipamv1.BFDProfile{Name: bfdName, ReceiveInterval: durationpb.New(100 * time.Millisecond), TransmitInterval: durationpb.New(time.Second), PassiveMode: true, MinimumTtl: 254},
				UpdateMask: mask("receive_interval", "transmit_interval", "detect_multiplier", "echo_mode", "echo_interval", "passive_mode", "minimum_ttl"),
			}},
		},
		{
			name:   "community aliases are edited with the etag read",
			args:   []string{"community", "update", "tags", "--tenant", "acme", "--alias", "b-", "--alias", "c=65000:3", "--alias", "a=65000:9"},
			etagOf: tagsName,
			want: []proto.Message{getTags, &ipamv1.UpdateCommunityRequest{
				Community: &ipamv1.Community{Name: tagsName, Etag: placeholder, Aliases: []*ipamv1.CommunityAlias{
					{Name: "a", Value: "65000:9"}, {Name: "c", Value: "65000:3"},
				}},
				UpdateMask: mask("aliases"),
			}},
		},
		{
			name: "community: the user's etag wins",
			args: []string{"community", "update", "tags", "--tenant", "acme", "--alias", "z-", "--etag", "e0"},
			want: []proto.Message{getTags, &ipamv1.UpdateCommunityRequest{
				Community: &ipamv1.Community{Name: tagsName, Etag: "e0", Aliases: []*ipamv1.CommunityAlias{
					{Name: "a", Value: "65000:1"}, {Name: "b", Value: "65000:2"},
				}},
				UpdateMask: mask("aliases"),
			}},
			wantErr: "Aborted",
		},
		{
			name:   "node labels are edited with the etag read",
			args:   []string{"node", "update", "worker-1.lab", "--tenant", "acme", "--label", "rack-", "--label", "zone=b", "--label", "node.kubernetes.io/exclude-from-external-load-balancers="},
			etagOf: "tenants/acme/nodes/worker-1.lab",
			want: []proto.Message{&ipamv1.GetNodeRequest{Name: "tenants/acme/nodes/worker-1.lab"}, &ipamv1.UpdateNodeRequest{
				Node: &ipamv1.Node{Name: "tenants/acme/nodes/worker-1.lab", Etag: placeholder, Labels: map[string]string{
					"zone": "b", "node.kubernetes.io/exclude-from-external-load-balancers": "",
				}},
				UpdateMask: mask("labels"),
			}},
		},
		{name: "node label removal on create", args: []string{"node", "create", "w2", "--tenant", "acme", "--label", "zone-"}, wantErr: `--label "zone-": want KEY=VALUE`},
		{name: "community bad edit fails before reading", args: []string{"community", "update", "tags", "--tenant", "acme", "--alias", "=x"}, wantErr: "want NAME=VALUE or NAME-"},
		{
			name:    "community unknown",
			args:    []string{"community", "update", "nope", "--tenant", "acme", "--alias", "a=1:1"},
			want:    []proto.Message{&ipamv1.GetCommunityRequest{Name: "tenants/acme/communities/nope"}},
			wantErr: "not found",
		},
		{name: "nothing to update", args: []string{"bfd", "update", "fast", "--tenant", "acme"}, wantErr: "nothing to update: set at least one of --receive-interval, --transmit-interval, --detect-multiplier"},
		{name: "only an etag", args: []string{"peer", "update", "tor1", "--tenant", "acme", "--etag", "e1"}, wantErr: "nothing to update"},
		{name: "bad selector", args: []string{"peer", "update", "tor1", "--tenant", "acme", "--node-selector", "x"}, wantErr: "want KEY=VALUE"},
		{name: "update without tenant", args: []string{"l2adv", "update", "web", "--pool", "web"}, wantErr: "--tenant is required"},
	})
}

func TestConfigGetListDeleteRequests(t *testing.T) {
	runConfigCases(t, seedConfigs, []configCase{
		{name: "get", args: []string{"l2adv", "get", "web", "--tenant", "acme"}, want: []proto.Message{&ipamv1.GetL2AdvertisementRequest{Name: "tenants/acme/l2Advertisements/web"}}},
		{name: "get by full name", args: []string{"community", "get", "tenants/acme/communities/tags"}, want: []proto.Message{&ipamv1.GetCommunityRequest{Name: "tenants/acme/communities/tags"}}},
		{name: "get needs a tenant", args: []string{"bfd", "get", "fast"}, wantErr: "--tenant is required"},
		{name: "get a name of another kind", args: []string{"peer", "get", "tenants/acme/l2Advertisements/web"}, wantErr: "tenants/TENANT/bgpPeers/ID"},
		{name: "list every tenant", args: []string{"bgpadv", "list"}, want: []proto.Message{&ipamv1.ListBGPAdvertisementsRequest{Parent: "tenants/-"}}},
		{name: "list one tenant, one page", args: []string{"peer", "list", "--tenant", "acme", "--page-size", "5", "--page-token", "0", "--all=false"}, want: []proto.Message{&ipamv1.ListBGPPeersRequest{Parent: "tenants/acme", PageSize: 5, PageToken: "0"}}, wantErr: "page_token: is not a page token"},
		{name: "list bfd", args: []string{"bfd", "list", "--tenant", "tenants/lab"}, want: []proto.Message{&ipamv1.ListBFDProfilesRequest{Parent: "tenants/lab"}}},
		{name: "list communities", args: []string{"communities", "list"}, want: []proto.Message{&ipamv1.ListCommunitiesRequest{Parent: "tenants/-"}}},
		{name: "list l2", args: []string{"l2adv", "list", "--tenant", "acme"}, want: []proto.Message{&ipamv1.ListL2AdvertisementsRequest{Parent: "tenants/acme"}}},
		{
			name:   "delete with etag",
			args:   []string{"bfd", "delete", "fast", "--tenant", "acme", "--etag", placeholder, "--request-id", "r"},
			etagOf: "tenants/acme/bfdProfiles/fast",
			want:   []proto.Message{&ipamv1.DeleteBFDProfileRequest{Name: "tenants/acme/bfdProfiles/fast", Etag: placeholder, RequestId: "r"}},
		},
		{name: "delete each kind", args: []string{"bgpadv", "delete", "tenants/acme/bgpAdvertisements/web"}, want: []proto.Message{&ipamv1.DeleteBGPAdvertisementRequest{Name: "tenants/acme/bgpAdvertisements/web"}}},
		{name: "delete peer", args: []string{"peer", "delete", "tor1", "--tenant", "acme"}, want: []proto.Message{&ipamv1.DeleteBGPPeerRequest{Name: "tenants/acme/bgpPeers/tor1"}}},
		{name: "delete l2", args: []string{"l2adv", "delete", "web", "--tenant", "acme"}, want: []proto.Message{&ipamv1.DeleteL2AdvertisementRequest{Name: "tenants/acme/l2Advertisements/web"}}},
		{name: "list nodes", args: []string{"nodes", "list", "--tenant", "acme"}, want: []proto.Message{&ipamv1.ListNodesRequest{Parent: "tenants/acme"}}},
		{name: "get node by full name", args: []string{"node", "get", "tenants/acme/nodes/worker-1.lab"}, want: []proto.Message{&ipamv1.GetNodeRequest{Name: "tenants/acme/nodes/worker-1.lab"}}},
		{name: "delete node", args: []string{"node", "delete", "worker-1.lab", "--tenant", "acme"}, want: []proto.Message{&ipamv1.DeleteNodeRequest{Name: "tenants/acme/nodes/worker-1.lab"}}},
		{name: "delete community", args: []string{"community", "delete", "tags", "--tenant", "acme"}, want: []proto.Message{&ipamv1.DeleteCommunityRequest{Name: "tenants/acme/communities/tags"}}},
		{name: "delete in every tenant", args: []string{"l2adv", "delete", "web", "--tenant", "-"}, wantErr: "cannot name one resource"},
	})
}

// TestConfigCommands runs each kind through create, read, update and
// delete against a real IPAM, checking what people and scripts see.
func TestConfigCommands(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	addr := ipam.addr
	steps := []struct {
		args       []string
		stdin      string
		wantStdout string
		wantStderr string
		wantErr    string
	}{
		{
			args: []string{"l2adv", "create", "web", "--tenant", "acme", "--pool", "web", "--interface", "eth0", "--node-priority", "1:rack=r1"},
			wantStdout: `NAME                                POOLS       NODE-SELECTORS   INTERFACES   PRIORITIES    CONDITIONS
tenants/acme/l2Advertisements/web   pools/web   *                eth0         1:{rack=r1}   -
`,
		},
		{args: []string{"l2adv", "create", "web", "--tenant", "acme"}, wantErr: "AlreadyExists"},
		{args: []string{"l2adv", "create", "all", "--tenant", "lab", "-o", "name"}, wantStdout: "tenants/lab/l2Advertisements/all\n"},
		{
			args: []string{"l2adv", "list"},
			wantStdout: `NAME                                POOLS       NODE-SELECTORS   INTERFACES   PRIORITIES    CONDITIONS
tenants/acme/l2Advertisements/web   pools/web   *                eth0         1:{rack=r1}   -
tenants/lab/l2Advertisements/all    *           *                *            -             -
`,
		},
		{
			args: []string{"l2adv", "update", "web", "--tenant", "acme", "--node-selector", "zone=a", "--node-selector", "zone=b", "--interface", ""},
			wantStdout: `NAME                                POOLS       NODE-SELECTORS      INTERFACES   PRIORITIES    CONDITIONS
tenants/acme/l2Advertisements/web   pools/web   {zone=a},{zone=b}   *            1:{rack=r1}   -
`,
		},
		{args: []string{"l2adv", "delete", "web", "--tenant", "acme"}, wantStdout: "deleted tenants/acme/l2Advertisements/web\n"},
		{args: []string{"l2adv", "get", "web", "--tenant", "acme"}, wantErr: "NotFound"},
		{args: []string{"l2adv", "list", "--tenant", "acme", "-o", "json"}, wantStdout: "[]\n"},

		{
			args: []string{"bgpadv", "create", "web", "--tenant", "acme", "--pool", "web", "--peer", "tor1", "--community", "65000:100", "--local-pref", "200"},
			wantStdout: `NAME                                 POOLS       PEERS   COMMUNITIES   LOCAL-PREF   AGG      CONDITIONS
tenants/acme/bgpAdvertisements/web   pools/web   tor1    65000:100     200          32/128   -
`,
		},
		{
			args: []string{"bgpadv", "update", "web", "--tenant", "acme", "--aggregation-length", "24", "--local-pref", "0", "-o", "json"},
			wantStdout: `{
  "name": "tenants/acme/bgpAdvertisements/web",
  "uid": "UID",
  "pools": [
    "pools/web"
  ],
  "peers": [
    "tor1"
  ],
  "communities": [
    "65000:100"
  ],
  "aggregationLength": 24,
  "aggregationLengthV6": 128,
  "etag": "ETAG",
  "createTime": "TIME",
  "updateTime": "TIME"
}
`,
		},

		{
			args:  []string{"peer", "create", "tor1", "--tenant", "acme", "--my-asn", "64512", "--peer-asn", "64500", "--peer-address", "198.51.100.1", "--password-stdin", "-o", "json"},
			stdin: "s3cret\n",
			wantStdout: `{
  "name": "tenants/acme/bgpPeers/tor1",
  "uid": "UID",
  "myAsn": 64512,
  "peerAsn": 64500,
  "peerAddress": "198.51.100.1",
  "hasPassword": true,
  "etag": "ETAG",
  "createTime": "TIME",
  "updateTime": "TIME"
}
`,
		},
		{
			args: []string{"bfd", "create", "fast", "--tenant", "acme", "--receive-interval", "50ms", "--transmit-interval", "50ms"},
			wantStdout: `NAME                            RX     TX     MULT
tenants/acme/bfdProfiles/fast   50ms   50ms   3
`,
		},
		{
			args: []string{"peer", "update", "tor1", "--tenant", "acme", "--bfd-profile", "fast", "--peer-port", "1179", "--node-selector", "rack=r1"},
			wantStdout: `NAME                         MY-ASN   PEER-ASN   ADDRESS             BFD    NODE-SELECTORS   CONDITIONS
tenants/acme/bgpPeers/tor1   64512    64500      198.51.100.1:1179   fast   {rack=r1}        -
`,
		},
		// The profile is in use until the peer goes.
		{args: []string{"bfd", "delete", "fast", "--tenant", "acme"}, wantErr: "FailedPrecondition"},
		{args: []string{"peer", "delete", "tenants/acme/bgpPeers/tor1", "-o", "name"}, wantStdout: "tenants/acme/bgpPeers/tor1\n"},
		{args: []string{"bfd", "delete", "fast", "--tenant", "acme", "-o", "json"}, wantStdout: "{}\n"},

		{
			args: []string{"community", "create", "tags", "--tenant", "acme", "--alias", "prod=65000:100", "--alias", "old=65000:1"},
			wantStdout: `NAME                            ALIASES
tenants/acme/communities/tags   prod=65000:100,old=65000:1
`,
		},
		{
			args: []string{"node", "create", "worker-1", "--tenant", "acme", "--label", "zone=a", "--label", "rack=r1"},
			wantStdout: `NAME                          LABELS
tenants/acme/nodes/worker-1   rack=r1,zone=a
`,
		},
		{
			args: []string{"node", "update", "worker-1", "--tenant", "acme", "--label", "rack-", "--label", "zone=b"},
			wantStdout: `NAME                          LABELS
tenants/acme/nodes/worker-1   zone=b
`,
		},
		{args: []string{"node", "delete", "worker-1", "--tenant", "acme", "-o", "name"}, wantStdout: "tenants/acme/nodes/worker-1\n"},
		{
			args: []string{"community", "update", "tags", "--tenant", "acme", "--alias", "old-", "--alias", "edge=large:64512:1:2"},
			wantStdout: `NAME                            ALIASES
tenants/acme/communities/tags   prod=65000:100,edge=large:64512:1:2
`,
		},
		{
			// What get -o json prints can be created again, here under
			// another name in another tenant.
			args: []string{"bgpadv", "create", "copy", "--tenant", "lab", "-f", "-", "-o", "name"},
			stdin: `{
  "name": "tenants/acme/bgpAdvertisements/web",
  "uid": "UID",
  "pools": ["pools/web"],
  "aggregationLength": 24,
  "conditions": [{"type": "Announced", "reason": "NoCommonNode"}],
  "etag": "e1+",
  "createTime": "2026-03-04T05:06:07Z"
}`,
			wantStdout: "tenants/lab/bgpAdvertisements/copy\n",
		},
		{args: []string{"bgpadv", "list", "-o", "name"}, wantStdout: "tenants/acme/bgpAdvertisements/web\ntenants/lab/bgpAdvertisements/copy\n"},
	}
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := runStdin(ctx, nil, strings.NewReader(s.stdin), append([]string{"--plaintext", "--server", addr}, s.args...)...)
		cancel()
		if s.wantErr != "" {
			if res.err == nil || !strings.Contains(output.FormatError(res.err), s.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", s.args, res.err, s.wantErr)
			}
			continue
		}
		if res.err != nil {
			t.Errorf("%v: %v", s.args, res.err)
			continue
		}
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
		if diff := cmp.Diff(s.wantStderr, res.stderr); diff != "" {
			t.Errorf("%v: stderr (-want +got):\n%s", s.args, diff)
		}
	}
}
