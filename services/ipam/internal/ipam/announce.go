package ipam

import (
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// NodePriority is one tier of preferred L2 nodes: lower Priority wins.
type NodePriority struct {
	Priority int               `json:"priority"`
	Selector selector.Selector `json:"selector"`
}

// L2Advertisement announces addresses of selected pools over ARP/NDP from
// one node at a time (MetalLB's L2Advertisement, plus node priorities).
type L2Advertisement struct {
	Tenant         string              `json:"tenant"`
	ID             string              `json:"id"`
	UID            string              `json:"uid"`
	Pools          []string            `json:"pools,omitempty"` // pool IDs
	PoolSelectors  []selector.Selector `json:"poolSelectors,omitempty"`
	NodeSelectors  []selector.Selector `json:"nodeSelectors,omitempty"`
	Interfaces     []string            `json:"interfaces,omitempty"`
	OwnerSelectors []selector.Selector `json:"ownerSelectors,omitempty"`
	NodePriorities []NodePriority      `json:"nodePriorities,omitempty"`
	CreateTime     time.Time           `json:"createTime"`
	UpdateTime     time.Time           `json:"updateTime"`
}

// BGPAdvertisement announces addresses of selected pools to BGP peers
// (MetalLB's BGPAdvertisement).
type BGPAdvertisement struct {
	Tenant        string              `json:"tenant"`
	ID            string              `json:"id"`
	UID           string              `json:"uid"`
	Pools         []string            `json:"pools,omitempty"`
	PoolSelectors []selector.Selector `json:"poolSelectors,omitempty"`
	NodeSelectors []selector.Selector `json:"nodeSelectors,omitempty"`
	// Peers are BGPPeer IDs; empty means every peer.
	Peers []string `json:"peers,omitempty"`
	// Communities are "A:B", "large:A:B:C" or alias names.
	Communities         []string            `json:"communities,omitempty"`
	LocalPref           uint32              `json:"localPref,omitempty"`
	AggregationLength   int                 `json:"aggregationLength"`   // IPv4, default 32
	AggregationLengthV6 int                 `json:"aggregationLengthV6"` // default 128
	OwnerSelectors      []selector.Selector `json:"ownerSelectors,omitempty"`
	CreateTime          time.Time           `json:"createTime"`
	UpdateTime          time.Time           `json:"updateTime"`
}

// BGPPeer is a router the tenant's nodes peer with (MetalLB's BGPPeer).
type BGPPeer struct {
	Tenant          string              `json:"tenant"`
	ID              string              `json:"id"`
	UID             string              `json:"uid"`
	MyASN           uint32              `json:"myASN"`
	PeerASN         uint32              `json:"peerASN"`
	PeerAddress     netip.Addr          `json:"peerAddress"`
	PeerPort        uint16              `json:"peerPort,omitempty"`
	SourceAddress   netip.Addr          `json:"sourceAddress,omitzero"`
	RouterID        netip.Addr          `json:"routerID,omitzero"`
	HoldTime        time.Duration       `json:"holdTime,omitempty"`
	KeepaliveTime   time.Duration       `json:"keepaliveTime,omitempty"`
	ConnectTime     time.Duration       `json:"connectTime,omitempty"`
	Password        string              `json:"password,omitempty"`
	PasswordFile    string              `json:"passwordFile,omitempty"`
	EBGPMultihop    bool                `json:"ebgpMultihop,omitempty"`
	GracefulRestart bool                `json:"gracefulRestart,omitempty"`
	NodeSelectors   []selector.Selector `json:"nodeSelectors,omitempty"`
	BFDProfile      string              `json:"bfdProfile,omitempty"`
	CreateTime      time.Time           `json:"createTime"`
	UpdateTime      time.Time           `json:"updateTime"`
}

// BFDProfile is a set of BFD session parameters (MetalLB's BFDProfile).
type BFDProfile struct {
	Tenant           string        `json:"tenant"`
	ID               string        `json:"id"`
	UID              string        `json:"uid"`
	ReceiveInterval  time.Duration `json:"receiveInterval"`
	TransmitInterval time.Duration `json:"transmitInterval"`
	DetectMultiplier uint32        `json:"detectMultiplier"`
	EchoMode         bool          `json:"echoMode,omitempty"`
	EchoInterval     time.Duration `json:"echoInterval,omitempty"`
	PassiveMode      bool          `json:"passiveMode,omitempty"`
	MinimumTTL       uint32        `json:"minimumTTL,omitempty"`
	CreateTime       time.Time     `json:"createTime"`
	UpdateTime       time.Time     `json:"updateTime"`
}

// CommunityAlias names a community value.
type CommunityAlias struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Community is a set of named community aliases (MetalLB's Community).
type Community struct {
	Tenant     string           `json:"tenant"`
	ID         string           `json:"id"`
	UID        string           `json:"uid"`
	Aliases    []CommunityAlias `json:"aliases"`
	CreateTime time.Time        `json:"createTime"`
	UpdateTime time.Time        `json:"updateTime"`
}

// Interface is one of a node's network interfaces.
type Interface struct {
	Name  string         `json:"name"`
	MAC   string         `json:"mac,omitempty"`
	Addrs []netip.Prefix `json:"addrs,omitempty"`
	Up    bool           `json:"up"`
}

// Node is an announcer's node as the planner sees it.
type Node struct {
	Tenant     string            `json:"tenant"`
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	Interfaces []Interface       `json:"interfaces,omitempty"`
	// Live is set while the node's announcer is subscribed.
	Live bool `json:"live"`
	// Draining nodes announce nothing (L2 moves away first).
	Draining bool `json:"draining,omitempty"`
	// ConnectTime is when the node's current session started.
	ConnectTime time.Time `json:"connectTime,omitzero"`
	// Announced and Sessions are what the announcer reports.
	Announced []AnnouncedAddr `json:"announced,omitempty"`
	Sessions  []SessionStatus `json:"sessions,omitempty"`
	// Conflicts are other hosts the node saw using its L2 addresses.
	Conflicts []AddrConflict `json:"conflicts,omitempty"`
}

// AddrConflict is another host using one of a node's L2 addresses, as the
// node reports it.
type AddrConflict struct {
	Addr      string `json:"addr"`
	Interface string `json:"interface"`
	MAC       string `json:"mac"`
	// BeforeAnswering: found by probing; the node does not answer for it.
	BeforeAnswering bool      `json:"beforeAnswering,omitempty"`
	Since           time.Time `json:"since,omitzero"`
}

// AnnouncedAddr is one address a node reports announcing.
type AnnouncedAddr struct {
	Addr       string   `json:"addr"`
	BGP        bool     `json:"bgp,omitempty"` // else L2
	Interfaces []string `json:"interfaces,omitempty"`
	Peers      []string `json:"peers,omitempty"`
}

// SessionStatus is one BGP session as a node reports it.
type SessionStatus struct {
	Peer       string    `json:"peer"`
	State      string    `json:"state"`
	BFDUp      bool      `json:"bfdUp,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	Advertised int       `json:"advertised,omitempty"`
}

// ClusterNode is what a tenant's cluster says about one of its nodes (the
// API's Node resource; the k8s adapter writes one per Kubernetes Node): its
// labels. They are merged over the labels the node's announcer registers
// with (see Node.Effective).
type ClusterNode struct {
	Tenant     string            `json:"tenant"`
	ID         string            `json:"id"` // the node's name
	UID        string            `json:"uid"`
	Labels     map[string]string `json:"labels,omitempty"`
	CreateTime time.Time         `json:"createTime"`
	UpdateTime time.Time         `json:"updateTime"`
}

// ExcludeLabel marks a node that must not announce load-balancer
// addresses, whatever its value (Kubernetes' well-known label, honoured by
// MetalLB's speakers).
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// Effective returns the node as announcement sees it: its registered labels
// with the cluster's (cn, may be nil) merged over them, and whether the
// result excludes it from announcing.
func (n *Node) Effective(cn *ClusterNode) (labels map[string]string, excluded bool) {
	labels = n.Labels
	if cn != nil && len(cn.Labels) > 0 {
		labels = make(map[string]string, len(n.Labels)+len(cn.Labels))
		maps.Copy(labels, n.Labels)
		maps.Copy(labels, cn.Labels)
	}
	_, excluded = labels[ExcludeLabel]
	return labels, excluded
}

// Drain marks a node drained: it outlives the node's sessions.
type Drain struct {
	Tenant string    `json:"tenant"`
	Node   string    `json:"node"`
	Since  time.Time `json:"since"`
}

// L2Owner records the node that answers ARP/NDP for an address (the
// per-address record of earlier versions; see L2OwnerSet).
type L2Owner struct {
	Addr netip.Addr `json:"addr"`
	Node string     `json:"node"`
}

// L2OwnerSet records the L2 addresses a node answers ARP/NDP for among one
// shard of its tenant's addresses, stored as "tenant/node/shard" (see
// L2OwnerSetID). Grouping the addresses keeps the number of etcd writes
// per move small: a node's death rewrites a few dozen sets, not one record
// per address. An address is in at most one set of its tenant.
type L2OwnerSet struct {
	Node  string       `json:"node"`
	Shard int          `json:"shard"`
	Addrs []netip.Addr `json:"addrs"`
}

// Leadership is the key an elected replica holds in an election, stored as
// "election/lease" and written by etcd's election recipe: its value is the
// replica's ID, not JSON. It exists while the replica's lease lasts, so a
// change that compares it (a fence: its revision as the replica won) fails
// once another replica may have been elected, even where every other
// condition of the change still holds.
type Leadership struct {
	Holder string
}

// L2OwnerSetID returns the ID of a tenant's owner set.
func L2OwnerSetID(tenant, node string, shard int) string {
	return tenant + "/" + node + "/" + strconv.Itoa(shard)
}

// ParseL2OwnerSetID splits an owner set's ID into its parts.
func ParseL2OwnerSetID(id string) (tenant, node string, shard int, ok bool) {
	tenant, rest, ok1 := strings.Cut(id, "/")
	i := strings.LastIndexByte(rest, '/')
	if !ok1 || i <= 0 {
		return "", "", 0, false
	}
	shard, err := strconv.Atoi(rest[i+1:])
	if err != nil || shard < 0 {
		return "", "", 0, false
	}
	return tenant, rest[:i], shard, true
}

// PlanPeer is a BGP session a node must have.
type PlanPeer struct {
	Peer *BGPPeer
	BFD  *BFDProfile // nil: no BFD
}

// PlanRoute is one prefix a node advertises to one peer, with that peer's
// attributes.
type PlanRoute struct {
	Prefix           netip.Prefix
	Peer             string // BGPPeer ID
	Communities      []uint32
	LargeCommunities [][3]uint32
	LocalPref        uint32
	// MED and ASPathPrepend (how many times the node's AS is prepended)
	// make the route less preferred: set on a global group's backup
	// member's routes (see BackupMED).
	MED           uint32
	ASPathPrepend uint32
}

// The attributes of a global group's backup member's routes: a MED of
// 1000, and on eBGP the node's AS prepended three times, on iBGP half the
// local preference (of 100 when the advertisement sets none; never a
// prepend, which an iBGP peer would drop as a loop), so that an active
// member's route wins by every rule routers apply.
const (
	BackupMED           = 1000
	BackupASPathPrepend = 3
)

// PlanL2 is an address a node answers ARP/NDP for.
type PlanL2 struct {
	Addr netip.Addr
	// Interfaces to answer on; empty: all.
	Interfaces []string
	// Allocation is "tenant/id" of the allocation, for status.
	Allocation string
}

// NodePlan is everything one node must announce.
type NodePlan struct {
	Peers  []PlanPeer
	Routes Routes
	L2     []PlanL2
}
