package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func peerKind() *configKind[*ipamv1.BGPPeer] {
	return &configKind[*ipamv1.BGPPeer]{
		use:        "peer",
		aliases:    []string{"peers", "bgppeer", "bgppeers"},
		noun:       "BGP peer",
		plural:     "BGP peers",
		collection: "bgpPeers",
		sampleID:   "tor1",
		short:      "Manage BGP peers: the routers the nodes peer with",
		long: `Manage BGP peers, the routers a tenant's nodes open BGP sessions with, as
MetalLB's BGPPeer.

A BGP peer belongs to a tenant and is named "tenants/TENANT/bgpPeers/ID";
commands take the ID with --tenant, or the full name. BGP advertisements
name peers by ID. Passwords are never returned: reads show whether one is
set (hasPassword in JSON). In tables, "*" in NODE-SELECTORS stands for every
node and BFD is the BFD profile.`,
		example: `  beaconctl peer create tor1 --tenant acme --my-asn 64512 --peer-asn 64500 --peer-address 192.0.2.1
  beaconctl peer list --tenant acme
  beaconctl peer update tor1 --tenant acme --bfd-profile fast
  beaconctl peer delete tor1 --tenant acme`,
		createLong: `Create a BGP peer named ID in --tenant. --my-asn, --peer-asn and
--peer-address are required by the server.

The TCP-MD5 password is given inline with --password-stdin (the first line
of standard input) or --password (visible to other users in the process
list), or as --password-file, a path on each announcer's node that holds it.
Durations take units: 90s, 1m30s. --hold-time is 0 (the default, 90s) or at
least 3s, and --keepalive-time shorter than it (default a third of it).
--bfd-profile names a BFD profile (see 'beaconctl bfd') to run BFD on the
sessions.

` + selectorHelp,
		createExample: `  # An eBGP peer every node peers with.
  beaconctl peer create tor1 --tenant acme --my-asn 64512 --peer-asn 64500 --peer-address 192.0.2.1

  # A peer for the nodes of rack r1 only, with BFD and a password read from a file.
  beaconctl peer create tor-r1 --tenant acme --my-asn 64512 --peer-asn 64500 \
      --peer-address 2001:db8::1 --peer-port 1179 --hold-time 30s --keepalive-time 10s \
      --node-selector rack=r1 --bfd-profile fast --graceful-restart --password-stdin < tor.secret`,
		updateLong: `Change the fields of a BGP peer named by the flags that are set.

` + updateHelp + ` A duration of 0 restores the default. A peer has
an inline password or a password file, not both: to switch, clear the other
(--password "" --password-file /etc/beacon/tor.secret).

` + selectorHelp,
		updateExample: `  beaconctl peer update tor1 --tenant acme --hold-time 30s --keepalive-time 10s
  beaconctl peer update tor1 --tenant acme --password-stdin < tor.secret
  beaconctl peer update tor1 --tenant acme --bfd-profile "" --node-selector ""
  beaconctl peer update tenants/acme/bgpPeers/tor1 --ebgp-multihop=false --etag "$ETAG"`,
		newMsg: func() *ipamv1.BGPPeer { return &ipamv1.BGPPeer{} },
		fields: peerFields,
		table:  output.BGPPeerTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.BGPPeer, requestID string, validateOnly bool) (*ipamv1.BGPPeer, error) {
			resp, err := c.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{
				Parent: parent, BgpPeerId: id, BgpPeer: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBgpPeer(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.BGPPeer, error) {
			resp, err := c.GetBGPPeer(ctx, &ipamv1.GetBGPPeerRequest{Name: name})
			return resp.GetBgpPeer(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.BGPPeer, string, error) {
			resp, err := c.ListBGPPeers(ctx, &ipamv1.ListBGPPeersRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetBgpPeers(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.BGPPeer, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.BGPPeer, error) {
			resp, err := c.UpdateBGPPeer(ctx, &ipamv1.UpdateBGPPeerRequest{
				BgpPeer: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBgpPeer(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteBGPPeer(ctx, &ipamv1.DeleteBGPPeerRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

// readSecretLine reads the first line of r, without its line ending.
func readSecretLine(r io.Reader) (string, error) {
	if r == nil {
		return "", nil
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func peerFields(g *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.BGPPeer] {
	var (
		myASN, peerASN                   uint32
		peerAddress, sourceAddress       string
		routerID                         string
		peerPort                         uint16
		holdTime, keepaliveTime, connect time.Duration
		password, passwordFile           string
		passwordStdin                    bool
		ebgpMultihop, gracefulRestart    bool
		nodeSelectors                    []string
		bfdProfile                       string
	)
	fs.Uint32Var(&myASN, "my-asn", 0, usage(update, "the nodes' AS `NUMBER` (required)", "new AS `NUMBER` of the nodes"))
	fs.Uint32Var(&peerASN, "peer-asn", 0, usage(update, "the peer's AS `NUMBER` (required)", "new AS `NUMBER` of the peer"))
	fs.StringVar(&peerAddress, "peer-address", "", usage(update, "the peer's IP `ADDRESS` (required)", "new IP `ADDRESS` of the peer"))
	fs.Uint16Var(&peerPort, "peer-port", 0, usage(update, "the peer's TCP `PORT` (default 179)", "new TCP `PORT` of the peer; 0 for 179"))
	fs.StringVar(&sourceAddress, "source-address", "", usage(update,
		"local IP `ADDRESS` to connect from (default: chosen by the kernel)",
		"new local IP `ADDRESS` to connect from; \"\" to let the kernel choose"))
	fs.StringVar(&routerID, "router-id", "", usage(update,
		"BGP router ID, an IPv4 `ADDRESS` (default: the node's address)",
		"new BGP router ID, an IPv4 `ADDRESS`; \"\" for the node's address"))
	fs.DurationVar(&holdTime, "hold-time", 0, usage(update, "BGP hold time `DURATION`: at least 3s (default 90s)", "new hold time `DURATION`; 0 for the default, 90s"))
	fs.DurationVar(&keepaliveTime, "keepalive-time", 0, usage(update,
		"keepalive `DURATION`, shorter than the hold time (default a third of it)",
		"new keepalive `DURATION`; 0 for the default, a third of the hold time"))
	fs.DurationVar(&connect, "connect-time", 0, usage(update, "connect retry `DURATION` (default 120s)", "new connect retry `DURATION`; 0 for the default, 120s"))
	fs.StringVar(&password, "password", "", usage(update,
		"TCP-MD5 `PASSWORD`, inline (other users can see it in the process list: prefer --password-stdin)",
		"new TCP-MD5 `PASSWORD`, inline; \"\" removes it (prefer --password-stdin to set one)"))
	fs.BoolVar(&passwordStdin, "password-stdin", false, "read the TCP-MD5 password from the first line of standard input")
	fs.StringVar(&passwordFile, "password-file", "", usage(update,
		"`PATH` of a file on each announcer's node holding the TCP-MD5 password (not read here)",
		"new `PATH` of the password file on the announcers' nodes; \"\" removes it"))
	fs.BoolVar(&ebgpMultihop, "ebgp-multihop", false, usage(update, "allow eBGP sessions over more than one hop", "whether to allow multihop eBGP (--ebgp-multihop=false to turn off)"))
	fs.BoolVar(&gracefulRestart, "graceful-restart", false, usage(update, "enable BGP graceful restart", "whether to enable graceful restart (--graceful-restart=false to turn off)"))
	fs.StringArrayVar(&nodeSelectors, "node-selector", nil, usage(update,
		"peer from nodes whose labels match `SELECTOR`, KEY=VALUE[,KEY=VALUE...] (repeatable; default: every node)",
		"replace the node selectors with `SELECTOR`s, KEY=VALUE[,KEY=VALUE...] (repeatable; \"\" for every node)"))
	fs.StringVar(&bfdProfile, "bfd-profile", "", usage(update,
		"run BFD on the sessions with the BFD profile `ID` (default: no BFD)",
		"new BFD profile `ID`; \"\" turns BFD off"))

	// Standard input is read once, even if the request is built twice.
	var (
		stdinRead     bool
		stdinPassword string
	)
	type m = *ipamv1.BGPPeer
	type in = fieldInput[m]
	return []field[m]{
		{flags: []string{"my-asn"}, path: "my_asn", set: func(p m, _ in) error {
			p.MyAsn = myASN
			return nil
		}},
		{flags: []string{"peer-asn"}, path: "peer_asn", set: func(p m, _ in) error {
			p.PeerAsn = peerASN
			return nil
		}},
		{flags: []string{"peer-address"}, path: "peer_address", set: func(p m, _ in) error {
			p.PeerAddress = peerAddress
			return nil
		}},
		{flags: []string{"peer-port"}, path: "peer_port", set: func(p m, _ in) error {
			p.PeerPort = uint32(peerPort)
			return nil
		}},
		{flags: []string{"source-address"}, path: "source_address", set: func(p m, _ in) error {
			p.SourceAddress = sourceAddress
			return nil
		}},
		{flags: []string{"router-id"}, path: "router_id", set: func(p m, _ in) error {
			p.RouterId = routerID
			return nil
		}},
		{flags: []string{"hold-time"}, path: "hold_time", set: func(p m, _ in) (err error) {
			p.HoldTime, err = optionalDuration("hold-time", holdTime)
			return err
		}},
		{flags: []string{"keepalive-time"}, path: "keepalive_time", set: func(p m, _ in) (err error) {
			p.KeepaliveTime, err = optionalDuration("keepalive-time", keepaliveTime)
			return err
		}},
		{flags: []string{"connect-time"}, path: "connect_time", set: func(p m, _ in) (err error) {
			p.ConnectTime, err = optionalDuration("connect-time", connect)
			return err
		}},
		{flags: []string{"password", "password-stdin"}, path: "password", stdinFlag: "password-stdin", set: func(p m, _ in) error {
			if !fs.Changed("password-stdin") {
				p.Password = password
				return nil
			}
			if fs.Changed("password") {
				return fmt.Errorf("give --password or --password-stdin, not both")
			}
			if !passwordStdin {
				return fmt.Errorf("--password-stdin=false sets nothing; leave it out")
			}
			if !stdinRead {
				pw, err := readSecretLine(g.env.Stdin)
				if err != nil {
					return fmt.Errorf("reading the password from standard input: %w", err)
				}
				if pw == "" {
					return fmt.Errorf("--password-stdin: standard input holds no password")
				}
				stdinRead, stdinPassword = true, pw
			}
			p.Password = stdinPassword
			return nil
		}},
		{flags: []string{"password-file"}, path: "password_file", set: func(p m, _ in) error {
			p.PasswordFile = passwordFile
			return nil
		}},
		{flags: []string{"ebgp-multihop"}, path: "ebgp_multihop", set: func(p m, _ in) error {
			p.EbgpMultihop = ebgpMultihop
			return nil
		}},
		{flags: []string{"graceful-restart"}, path: "graceful_restart", set: func(p m, _ in) error {
			p.GracefulRestart = gracefulRestart
			return nil
		}},
		{flags: []string{"node-selector"}, path: "node_selectors", set: func(p m, _ in) (err error) {
			p.NodeSelectors, err = parseSelectors("node-selector", nodeSelectors)
			return err
		}},
		{flags: []string{"bfd-profile"}, path: "bfd_profile", set: func(p m, x in) error {
			if bfdProfile == "" {
				p.BfdProfile = ""
				return nil
			}
			ids, err := configIDs("bfd-profile", "bfdProfiles", x.parent, []string{bfdProfile})
			if err != nil {
				return err
			}
			p.BfdProfile = ids[0]
			return nil
		}},
	}
}

func bfdKind() *configKind[*ipamv1.BFDProfile] {
	return &configKind[*ipamv1.BFDProfile]{
		use:        "bfd",
		aliases:    []string{"bfdprofile", "bfdprofiles"},
		noun:       "BFD profile",
		plural:     "BFD profiles",
		collection: "bfdProfiles",
		sampleID:   "fast",
		short:      "Manage BFD profiles: BFD session parameters for BGP peers",
		long: `Manage BFD profiles, the BFD parameters of the sessions of the BGP peers
that name them with --bfd-profile, as MetalLB's BFDProfile. A profile in
use by a peer cannot be deleted.

A BFD profile belongs to a tenant and is named
"tenants/TENANT/bfdProfiles/ID"; commands take the ID with --tenant, or the
full name. In tables, RX and TX are the receive and transmit intervals and
MULT the detect multiplier; unset values show their defaults.`,
		example: `  beaconctl bfd create fast --tenant acme --receive-interval 100ms --transmit-interval 100ms
  beaconctl bfd list --tenant acme
  beaconctl bfd update fast --tenant acme --detect-multiplier 5
  beaconctl bfd delete fast --tenant acme`,
		createLong: `Create a BFD profile named ID in --tenant. Intervals are 10ms to 60s
(default 300ms; echo 50ms) and the detect multiplier 2 to 255 (default 3).`,
		createExample: `  # Defaults: 300ms intervals, 3 packets missed.
  beaconctl bfd create default --tenant acme

  # Fast detection with echo, for a directly connected router.
  beaconctl bfd create fast --tenant acme --receive-interval 50ms --transmit-interval 50ms \
      --detect-multiplier 3 --echo-mode --echo-interval 50ms

  # Multihop, waiting for the peer to start.
  beaconctl bfd create multihop --tenant acme --passive-mode --minimum-ttl 250`,
		updateLong: `Change the fields of a BFD profile named by the flags that are set.

` + updateHelp + ` An interval or multiplier of 0 restores the default.`,
		updateExample: `  beaconctl bfd update fast --tenant acme --receive-interval 100ms --transmit-interval 100ms
  beaconctl bfd update fast --tenant acme --echo-mode=false
  beaconctl bfd update tenants/acme/bfdProfiles/fast --detect-multiplier 0 --etag "$ETAG"`,
		newMsg: func() *ipamv1.BFDProfile { return &ipamv1.BFDProfile{} },
		fields: bfdFields,
		table:  output.BFDProfileTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.BFDProfile, requestID string, validateOnly bool) (*ipamv1.BFDProfile, error) {
			resp, err := c.CreateBFDProfile(ctx, &ipamv1.CreateBFDProfileRequest{
				Parent: parent, BfdProfileId: id, BfdProfile: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBfdProfile(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.BFDProfile, error) {
			resp, err := c.GetBFDProfile(ctx, &ipamv1.GetBFDProfileRequest{Name: name})
			return resp.GetBfdProfile(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.BFDProfile, string, error) {
			resp, err := c.ListBFDProfiles(ctx, &ipamv1.ListBFDProfilesRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetBfdProfiles(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.BFDProfile, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.BFDProfile, error) {
			resp, err := c.UpdateBFDProfile(ctx, &ipamv1.UpdateBFDProfileRequest{
				BfdProfile: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetBfdProfile(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteBFDProfile(ctx, &ipamv1.DeleteBFDProfileRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

func bfdFields(_ *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.BFDProfile] {
	var (
		rx, tx, echoInterval  time.Duration
		multiplier, minTTL    uint32
		echoMode, passiveMode bool
	)
	fs.DurationVar(&rx, "receive-interval", 0, usage(update,
		"minimum `DURATION` between received packets (default 300ms)", "new receive interval `DURATION`; 0 for the default, 300ms"))
	fs.DurationVar(&tx, "transmit-interval", 0, usage(update,
		"minimum `DURATION` between sent packets (default 300ms)", "new transmit interval `DURATION`; 0 for the default, 300ms"))
	fs.Uint32Var(&multiplier, "detect-multiplier", 0, usage(update,
		"packets missed, `N`, before the session is down (default 3)", "new detect multiplier `N`; 0 for the default, 3"))
	fs.BoolVar(&echoMode, "echo-mode", false, usage(update, "enable echo mode", "whether to use echo mode (--echo-mode=false to turn off)"))
	fs.DurationVar(&echoInterval, "echo-interval", 0, usage(update,
		"echo interval `DURATION` (default 50ms)", "new echo interval `DURATION`; 0 for the default, 50ms"))
	fs.BoolVar(&passiveMode, "passive-mode", false, usage(update,
		"wait for the peer to start the session", "whether to wait for the peer to start (--passive-mode=false to turn off)"))
	fs.Uint32Var(&minTTL, "minimum-ttl", 0, usage(update,
		"minimum `TTL` of incoming packets, 0-254, for multihop", "new minimum `TTL` of incoming packets"))
	type m = *ipamv1.BFDProfile
	type in = fieldInput[m]
	return []field[m]{
		{flags: []string{"receive-interval"}, path: "receive_interval", set: func(b m, _ in) (err error) {
			b.ReceiveInterval, err = optionalDuration("receive-interval", rx)
			return err
		}},
		{flags: []string{"transmit-interval"}, path: "transmit_interval", set: func(b m, _ in) (err error) {
			b.TransmitInterval, err = optionalDuration("transmit-interval", tx)
			return err
		}},
		{flags: []string{"detect-multiplier"}, path: "detect_multiplier", set: func(b m, _ in) error {
			b.DetectMultiplier = multiplier
			return nil
		}},
		{flags: []string{"echo-mode"}, path: "echo_mode", set: func(b m, _ in) error {
			b.EchoMode = echoMode
			return nil
		}},
		{flags: []string{"echo-interval"}, path: "echo_interval", set: func(b m, _ in) (err error) {
			b.EchoInterval, err = optionalDuration("echo-interval", echoInterval)
			return err
		}},
		{flags: []string{"passive-mode"}, path: "passive_mode", set: func(b m, _ in) error {
			b.PassiveMode = passiveMode
			return nil
		}},
		{flags: []string{"minimum-ttl"}, path: "minimum_ttl", set: func(b m, _ in) error {
			b.MinimumTtl = minTTL
			return nil
		}},
	}
}

func communityKind() *configKind[*ipamv1.Community] {
	return &configKind[*ipamv1.Community]{
		use:        "community",
		aliases:    []string{"communities"},
		noun:       "community alias set",
		plural:     "community alias sets",
		collection: "communities",
		sampleID:   "tags",
		short:      "Manage BGP community aliases, names for community values",
		long: `Manage sets of BGP community aliases, as MetalLB's Community: names that
BGP advertisements may use in --community instead of the value.

A set belongs to a tenant and is named "tenants/TENANT/communities/ID";
commands take the ID with --tenant, or the full name. Alias names are 1-63
lower-case letters, digits and '-', starting with a letter; values are
"A:B" (16-bit parts) or "large:A:B:C" (32-bit parts).`,
		example: `  beaconctl community create tags --tenant acme --alias no-advertise=65535:65282
  beaconctl community list --tenant acme
  beaconctl community update tags --tenant acme --alias prod=large:64512:1:1 --alias old-
  beaconctl community delete tags --tenant acme`,
		createLong: `Create a set of community aliases named ID in --tenant, each alias given
as --alias NAME=VALUE.`,
		createExample: `  beaconctl community create tags --tenant acme \
      --alias no-advertise=65535:65282 --alias prod=large:64512:1:1`,
		updateLong: `Change the aliases of a set: --alias NAME=VALUE adds an alias or changes
its value, --alias NAME- removes it. The set is read first, and the change
is sent with the etag read, so that it fails with Aborted instead of
overwriting a change made meanwhile; run it again in that case.`,
		updateExample: `  beaconctl community update tags --tenant acme --alias prod=large:64512:1:2
  beaconctl community update tags --tenant acme --alias old- --alias new=65000:7`,
		newMsg: func() *ipamv1.Community { return &ipamv1.Community{} },
		fields: communityFields,
		table:  output.CommunityTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.Community, requestID string, validateOnly bool) (*ipamv1.Community, error) {
			resp, err := c.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{
				Parent: parent, CommunityId: id, Community: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetCommunity(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.Community, error) {
			resp, err := c.GetCommunity(ctx, &ipamv1.GetCommunityRequest{Name: name})
			return resp.GetCommunity(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.Community, string, error) {
			resp, err := c.ListCommunities(ctx, &ipamv1.ListCommunitiesRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetCommunities(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.Community, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.Community, error) {
			resp, err := c.UpdateCommunity(ctx, &ipamv1.UpdateCommunityRequest{
				Community: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetCommunity(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteCommunity(ctx, &ipamv1.DeleteCommunityRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

func communityFields(_ *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.Community] {
	var aliases []string
	fs.StringArrayVar(&aliases, "alias", nil, usage(update,
		"alias `NAME=VALUE`, VALUE being A:B or large:A:B:C (repeatable)",
		"`NAME=VALUE` to add or change an alias, NAME- to remove one (repeatable)"))
	type m = *ipamv1.Community
	return []field[m]{
		{flags: []string{"alias"}, path: "aliases", needsCurrent: update, set: func(c m, x fieldInput[m]) (err error) {
			c.Aliases, err = editAliases("alias", x.current.GetAliases(), aliases, update)
			return err
		}},
	}
}
