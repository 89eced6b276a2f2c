package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

const node1 = "tenants/acme/announcers/node-1"

func seedAnnouncers(f *fakeIPAM) {
	f.announcers[node1] = &ipamv1.Announcer{
		Name:        node1,
		Labels:      map[string]string{"zone": "a"},
		Interfaces:  []*ipamv1.NetworkInterface{{Name: "eth0", HardwareAddress: "02:00:00:00:00:01", Addresses: []string{"192.0.2.10/24"}, Up: true}},
		Live:        true,
		ConnectTime: timestamppb.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
		Status: &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{
				{Address: "192.0.2.7", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
				{Address: "192.0.2.8/32", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tenants/acme/bgpPeers/tor1"}},
			},
			Sessions: []*ipamv1.BGPSessionStatus{
				{Peer: "tenants/acme/bgpPeers/tor1", State: ipamv1.BGPSessionStatus_STATE_ESTABLISHED, BfdUp: true, AdvertisedPrefixes: 1},
			},
		},
	}
	f.announcers["tenants/lab/announcers/rack7.example"] = &ipamv1.Announcer{Name: "tenants/lab/announcers/rack7.example", Live: true}
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
	f := newFake()
	seedAnnouncers(f)
	addr := f.start(t)
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
Connected:   2026-03-04T05:06:07Z
Draining:    false
Excluded:    false
Labels:      zone=a

Interfaces:
  NAME   STATE   MAC                 ADDRESSES
  eth0   up      02:00:00:00:00:01   192.0.2.10/24

Announced:
  ADDRESS        PROTOCOL   INTERFACES/PEERS
  192.0.2.7      L2         eth0
  192.0.2.8/32   BGP        tenants/acme/bgpPeers/tor1

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
		// Lists show live nodes only; get finds one drained while away.
		{args: []string{"announcer", "list", "--tenant", "acme", "-o", "name"}, wantStdout: node1 + "\n"},
		{args: []string{"announcer", "get", "node-9", "--tenant", "acme", "-o", "json"}, wantStdout: "{\n  \"name\": \"tenants/acme/announcers/node-9\",\n  \"draining\": true\n}\n"},
		// The server ends the drain, then cannot find the node it returns.
		{args: []string{"announcer", "undrain", "node-9", "--tenant", "acme"}, wantErr: "NotFound"},
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
			if diff := cmp.Diff(s.wantStdout, res.stdout); diff != "" {
				t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
			}
		}
		if diff := cmp.Diff(s.wantStderr, res.stderr); diff != "" {
			t.Errorf("%v: stderr (-want +got):\n%s", s.args, diff)
		}
	}
	if f.announcers[node1].GetDraining() {
		t.Error("node-1 is still drained after undrain")
	}
}
