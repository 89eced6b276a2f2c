package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

const node1 = "tenants/acme/announcers/node-1"

// seedAnnouncers makes node-1 of acme (with an address announced over L2
// and one over BGP) and rack7.example of lab live: real announcer sessions.
// Pool web must exist.
func seedAnnouncers(e *testIPAM) {
	e.allocate("acme", "default/web", "web", func(a *ipamv1.Allocation) { a.RequestedAddresses = []string{"198.51.100.7"} })
	e.allocate("acme", "default/db", "web", func(a *ipamv1.Allocation) { a.RequestedAddresses = []string{"198.51.100.8"} })
	e.announce("acme", "node-1", map[string]string{"zone": "a"},
		[]*ipamv1.NetworkInterface{{Name: "eth0", HardwareAddress: "02:00:00:00:00:01", Addresses: []string{"198.51.100.100/24"}, Up: true}},
		&ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{
				{Address: "198.51.100.7", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
				{Address: "198.51.100.8/32", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tenants/acme/bgpPeers/tor1"}},
			},
			Sessions: []*ipamv1.BGPSessionStatus{
				{Peer: "tenants/acme/bgpPeers/tor1", State: ipamv1.BGPSessionStatus_STATE_ESTABLISHED, BfdUp: true, AdvertisedPrefixes: 1},
			},
		})
	e.announce("lab", "rack7.example", nil, nil, &ipamv1.AnnouncerStatus{})
}

func TestAnnouncerRequests(t *testing.T) {
	runConfigCases(t, seedAnnouncers, []configCase{
		{name: "list every tenant", args: []string{"announcer", "list"}, want: []proto.Message{&ipamv1.ListAnnouncersRequest{Parent: "tenants/-"}}},
		{name: "list one tenant", args: []string{"announcers", "list", "--tenant", "lab", "--page-size", "10"}, want: []proto.Message{&ipamv1.ListAnnouncersRequest{Parent: "tenants/lab", PageSize: 10}}},
		{name: "get", args: []string{"announcer", "get", "node-1", "--tenant", "acme"}, want: []proto.Message{&ipamv1.GetAnnouncerRequest{Name: node1}}},
		{name: "get by full name", args: []string{"announcer", "get", "tenants/lab/announcers/rack7.example"}, want: []proto.Message{&ipamv1.GetAnnouncerRequest{Name: "tenants/lab/announcers/rack7.example"}}},
		{name: "get needs a tenant", args: []string{"announcer", "get", "node-1"}, wantErr: "--tenant is required"},
		{name: "get needs a node", args: []string{"announcer", "get", "--tenant", "acme"}, wantErr: "missing NODE"},
		{name: "drain", args: []string{"announcer", "drain", "node-1", "--tenant", "acme"}, want: []proto.Message{&ipamv1.DrainAnnouncerRequest{Name: node1}}},
		{name: "undrain", args: []string{"announcer", "undrain", node1}, want: []proto.Message{&ipamv1.UndrainAnnouncerRequest{Name: node1}}},
		{name: "drain in every tenant", args: []string{"announcer", "drain", "node-1", "--tenant", "-"}, wantErr: "cannot name one resource"},
		{name: "drain a name of another kind", args: []string{"announcer", "drain", "tenants/acme/bgpPeers/tor1"}, wantErr: "tenants/TENANT/announcers/ID"},
	})
}

func TestAnnouncerOutput(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	seedAnnouncers(ipam)
	addr := ipam.addr
	steps := []struct {
		args       []string
		wantStdout string
		wantStderr string
		wantErr    string
	}{
		{
			args: []string{"announcer", "list"},
			wantStdout: `NAME                                   LIVE   DRAINING   INTERFACES   ANNOUNCED   SESSIONS
tenants/acme/announcers/node-1         true   false      eth0         2           1/1
tenants/lab/announcers/rack7.example   true   false      -            0           -
`,
		},
		{
			args: []string{"announcer", "get", "node-1", "--tenant", "acme"},
			wantStdout: `Name:        tenants/acme/announcers/node-1
Live:        true
Connected:   TIME
Draining:    false
Excluded:    false
Labels:      zone=a

Interfaces:
  NAME   STATE   MAC                 ADDRESSES
  eth0   up      02:00:00:00:00:01   198.51.100.100/24

Announced:
  ADDRESS           PROTOCOL   INTERFACES/PEERS
  198.51.100.7      L2         eth0
  198.51.100.8/32   BGP        tenants/acme/bgpPeers/tor1

BGP sessions:
  PEER                         STATE         BFD   SINCE   PREFIXES
  tenants/acme/bgpPeers/tor1   ESTABLISHED   up    -       1
`,
		},
		{args: []string{"announcer", "get", "node-1", "--tenant", "acme", "-o", "name"}, wantStdout: node1 + "\n"},
		{
			args: []string{"announcer", "drain", "node-1", "--tenant", "acme"},
			wantStdout: `NAME                             LIVE   DRAINING   INTERFACES   ANNOUNCED   SESSIONS
tenants/acme/announcers/node-1   true   true       eth0         2           1/1
`,
		},
		{
			args:       []string{"announcer", "drain", "node-9", "--tenant", "acme", "-o", "name"},
			wantStdout: "tenants/acme/announcers/node-9\n",
			wantStderr: "warning: tenants/acme/announcers/node-9 is not subscribed now; the drain applies when it subscribes (check the node name)\n",
		},
		// Lists show the live nodes and one drained while away.
		{args: []string{"announcer", "list", "--tenant", "acme", "-o", "name"}, wantStdout: node1 + "\n" + "tenants/acme/announcers/node-9\n"},
		{args: []string{"announcer", "get", "node-9", "--tenant", "acme", "-o", "json"}, wantStdout: "{\n  \"name\": \"tenants/acme/announcers/node-9\",\n  \"status\": {},\n  \"draining\": true\n}\n"},
		// Undrained while away, the node is no longer one the IPAM knows.
		{
			args: []string{"announcer", "undrain", "node-9", "--tenant", "acme"},
			wantStdout: `NAME                             LIVE    DRAINING   INTERFACES   ANNOUNCED   SESSIONS
tenants/acme/announcers/node-9   false   false      -            0           -
`,
		},
		{args: []string{"announcer", "get", "node-9", "--tenant", "acme"}, wantErr: "NotFound"},
		{args: []string{"announcer", "undrain", "node-1", "--tenant", "acme", "-o", "name"}, wantStdout: node1 + "\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
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
		if s.wantStdout != "" {
			if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
				t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
			}
		}
		if diff := cmp.Diff(s.wantStderr, res.stderr); diff != "" {
			t.Errorf("%v: stderr (-want +got):\n%s", s.args, diff)
		}
	}
	resp, err := ipamv1.NewAnnouncerServiceClient(ipam.conn).GetAnnouncer(ipam.ctx(), &ipamv1.GetAnnouncerRequest{Name: node1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAnnouncer().GetDraining() {
		t.Error("node-1 is still drained after undrain")
	}
}
