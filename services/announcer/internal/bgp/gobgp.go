package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// apiPeer translates a normalized PeerConfig into GoBGP's peer.
func apiPeer(pc PeerConfig) *api.Peer {
	var afiSafis []*api.AfiSafi
	for _, f := range peerFamilies(pc) {
		family := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
		if f == bgp.RF_IPv6_UC {
			family = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
		}
		afiSafi := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: family, Enabled: true}}
		if pc.GracefulRestart {
			afiSafi.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		afiSafis = append(afiSafis, afiSafi)
	}
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: pc.Address.String(),
			PeerAsn:         pc.PeerASN,
			LocalAsn:        pc.MyASN,
			AuthPassword:    pc.Password,
			Description:     pc.Name,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          uint64(pc.HoldTime / time.Second),
			KeepaliveInterval: uint64(pc.KeepaliveTime / time.Second),
			ConnectRetry:      uint64(pc.ConnectRetry / time.Second),
			// After a reset (BFD down, a hard reset) GoBGP waits this
			// long before reconnecting; its default is 30 s.
			IdleHoldTimeAfterReset: 1,
		}},
		Transport: &api.Transport{RemotePort: uint32(pc.Port)},
		AfiSafis:  afiSafis,
	}
	if pc.SourceAddress.IsValid() {
		p.Transport.LocalAddress = pc.SourceAddress.String()
	}
	if pc.EBGPMultihop {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: 255}
	}
	if pc.GracefulRestart {
		p.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(pc.RestartTime / time.Second)}
	}
	if b := pc.BFD; b != nil {
		p.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			RequiredMinimumReceive:   uint32(b.RxInterval / time.Microsecond),
			DesiredMinimumTxInterval: uint32(b.TxInterval / time.Microsecond),
			DetectionMultiplier:      b.DetectMultiplier,
		}
	}
	return p
}

// peerFamilies are the address families a peer's session carries: its
// address's.
func peerFamilies(pc PeerConfig) []bgp.Family {
	if pc.Address.Is4() {
		return []bgp.Family{bgp.RF_IPv4_UC}
	}
	return []bgp.Family{bgp.RF_IPv6_UC}
}

// adjOut lists the prefixes GoBGP's adj-RIB-out holds for a peer: the paths
// of the global table that the export policy gives it, in the families its
// session carries. GoBGP computes it as it does for an update to the peer.
// Sorted.
func adjOut(srv *server.BgpServer, pc PeerConfig) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range peerFamilies(pc) {
		err := srv.ListPath(apiutil.ListPathRequest{
			TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: pc.Address.String(), Family: f,
		}, func(nlri bgp.NLRI, _ []*apiutil.Path) {
			if p, ok := nlri.(*bgp.IPAddrPrefix); ok {
				out = append(out, p.Prefix)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("bgp: adj-RIB-out of %s: %w", pc.Address, err)
		}
	}
	slices.SortFunc(out, comparePrefix)
	return out, nil
}

// localPath is the one path the Speaker keeps for a prefix: origin IGP and
// an unspecified next hop, which GoBGP replaces with the session's local
// address when it sends the route. Attributes come from the export policy.
func localPath(prefix netip.Prefix) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("nlri %s: %w", prefix, err)
	}
	origin := bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)
	if prefix.Addr().Is4() {
		nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, fmt.Errorf("next hop: %w", err)
		}
		return &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{origin, nh}}, nil
	}
	mp, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
	if err != nil {
		return nil, fmt.Errorf("mp reach: %w", err)
	}
	return &apiutil.Path{Family: bgp.RF_IPv6_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{origin, mp}}, nil
}

// fsmStateName names a GoBGP session state the way SessionState does.
func fsmStateName(s bgp.FSMState) string {
	switch s {
	case bgp.BGP_FSM_CONNECT:
		return StateConnect
	case bgp.BGP_FSM_ACTIVE:
		return StateActive
	case bgp.BGP_FSM_OPENSENT:
		return StateOpenSent
	case bgp.BGP_FSM_OPENCONFIRM:
		return StateOpenConfirm
	case bgp.BGP_FSM_ESTABLISHED:
		return StateEstablished
	default:
		return StateIdle
	}
}

func apiStateName(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_SESSION_STATE_CONNECT:
		return StateConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return StateActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return StateOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return StateOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return StateEstablished
	default:
		return StateIdle
	}
}

// levelHandler drops GoBGP's records below a level (GoBGP logs every
// configuration step at info), and all of them while mute is set.
type levelHandler struct {
	min  slog.Leveler
	mute *atomic.Bool
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.mute.Load() && l >= h.min.Level() && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.min, h.mute, h.Handler.WithAttrs(as)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.min, h.mute, h.Handler.WithGroup(name)}
}
