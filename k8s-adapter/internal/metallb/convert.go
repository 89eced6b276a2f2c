package metallb

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Labels the adapter puts on the pools it creates, to find them again.
const (
	LabelTenant = "beacon.io/tenant"
	LabelSource = "beacon.io/source"
	SourceValue = "metallb"
)

// Object is a MetalLB resource as read from the API server.
type Object struct {
	Namespace, Name string
	Labels          map[string]string
	Spec            map[string]any
}

func (o Object) key() string { return o.Namespace + "/" + o.Name }

// Pool converts an IPAddressPool into a pool that only tenant may draw
// from, labelled with the IPAddressPool's labels (for advertisements'
// ipAddressPoolSelectors) and the adapter's own.
func Pool(tenant string, o Object) (*ipamv1.Pool, error) {
	var r reader
	p := &ipamv1.Pool{
		Description: fmt.Sprintf("MetalLB IPAddressPool %s of cluster %s", o.key(), tenant),
		Tenants:     []string{tenant},
		Labels:      map[string]string{},
	}
	maps.Copy(p.Labels, o.Labels)
	p.Labels[LabelTenant] = tenant
	p.Labels[LabelSource] = SourceValue
	for _, a := range r.strs(o.Spec, "spec", "addresses") {
		// MetalLB accepts "a - b" with spaces around the dash.
		p.Ranges = append(p.Ranges, strings.ReplaceAll(a, " ", ""))
	}
	if len(p.Ranges) == 0 {
		r.fail("spec.addresses", "at least one address range is required")
	}
	if auto, ok := r.boolean(o.Spec, "spec", "autoAssign"); ok {
		p.AutoAssign = &auto
	}
	p.AvoidBuggyIps, _ = r.boolean(o.Spec, "spec", "avoidBuggyIPs")
	if sa := r.object(o.Spec, "spec", "serviceAllocation"); sa != nil {
		pol := &ipamv1.AllocationPolicy{}
		if prio, ok := r.integer(sa, "spec.serviceAllocation", "priority", 0, math.MaxInt32); ok {
			pol.Priority = int32(prio)
		}
		pol.Namespaces = r.strs(sa, "spec.serviceAllocation", "namespaces")
		pol.NamespaceSelectors = r.selectors(sa, "spec.serviceAllocation", "namespaceSelectors")
		pol.OwnerSelectors = r.selectors(sa, "spec.serviceAllocation", "serviceSelectors")
		p.AllocationPolicy = pol
	}
	return p, r.err()
}

// pools returns the IPAM pool names of IPAddressPool names.
func pools(tenant, namespace string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "pools/"+PoolID(tenant, namespace, n))
	}
	return out
}

// L2Advertisement converts an L2Advertisement.
func L2Advertisement(tenant string, o Object) (*ipamv1.L2Advertisement, error) {
	var r reader
	a := &ipamv1.L2Advertisement{
		Pools:         pools(tenant, o.Namespace, r.strs(o.Spec, "spec", "ipAddressPools")),
		PoolSelectors: r.selectors(o.Spec, "spec", "ipAddressPoolSelectors"),
		NodeSelectors: r.selectors(o.Spec, "spec", "nodeSelectors"),
		Interfaces:    r.strs(o.Spec, "spec", "interfaces"),
	}
	return a, r.err()
}

// BGPAdvertisement converts a BGPAdvertisement.
func BGPAdvertisement(tenant string, o Object) (*ipamv1.BGPAdvertisement, error) {
	var r reader
	a := &ipamv1.BGPAdvertisement{
		Pools:         pools(tenant, o.Namespace, r.strs(o.Spec, "spec", "ipAddressPools")),
		PoolSelectors: r.selectors(o.Spec, "spec", "ipAddressPoolSelectors"),
		NodeSelectors: r.selectors(o.Spec, "spec", "nodeSelectors"),
		Communities:   r.strs(o.Spec, "spec", "communities"),
	}
	for _, p := range r.strs(o.Spec, "spec", "peers") {
		a.Peers = append(a.Peers, ResourceID(o.Namespace, p))
	}
	if n, ok := r.integer(o.Spec, "spec", "localPref", 0, math.MaxUint32); ok {
		a.LocalPref = uint32(n)
	}
	if n, ok := r.integer(o.Spec, "spec", "aggregationLength", 0, 32); ok {
		a.AggregationLength = int32(n)
	}
	if n, ok := r.integer(o.Spec, "spec", "aggregationLengthV6", 0, 128); ok {
		a.AggregationLengthV6 = int32(n)
	}
	return a, r.err()
}

// PasswordLookup returns the password stored in a Secret (MetalLB's
// passwordSecret: key "password" of a Secret of type
// kubernetes.io/basic-auth).
type PasswordLookup func(namespace, name string) (string, error)

// BGPPeer converts a BGPPeer (v1beta1 or v1beta2). It also returns the
// fields it cannot honour, for a warning.
func BGPPeer(o Object, password PasswordLookup) (*ipamv1.BGPPeer, []string, error) {
	var r reader
	p := &ipamv1.BGPPeer{
		PeerAddress:   r.str(o.Spec, "spec", "peerAddress"),
		SourceAddress: r.str(o.Spec, "spec", "sourceAddress"),
		RouterId:      r.str(o.Spec, "spec", "routerID"),
		HoldTime:      r.duration(o.Spec, "spec", "holdTime"),
		KeepaliveTime: r.duration(o.Spec, "spec", "keepaliveTime"),
		ConnectTime:   r.duration(o.Spec, "spec", "connectTime"),
		Password:      r.str(o.Spec, "spec", "password"),
		NodeSelectors: r.selectors(o.Spec, "spec", "nodeSelectors"),
	}
	if n, ok := r.integer(o.Spec, "spec", "myASN", 0, math.MaxUint32); ok {
		p.MyAsn = uint32(n)
	}
	if n, ok := r.integer(o.Spec, "spec", "peerASN", 0, math.MaxUint32); ok {
		p.PeerAsn = uint32(n)
	}
	if n, ok := r.integer(o.Spec, "spec", "peerPort", 0, 65535); ok {
		p.PeerPort = uint32(n)
	}
	p.EbgpMultihop, _ = r.boolean(o.Spec, "spec", "ebgpMultiHop")
	p.GracefulRestart, _ = r.boolean(o.Spec, "spec", "enableGracefulRestart")
	if b := r.str(o.Spec, "spec", "bfdProfile"); b != "" {
		p.BfdProfile = ResourceID(o.Namespace, b)
	}
	if ps := r.object(o.Spec, "spec", "passwordSecret"); ps != nil {
		name := r.str(ps, "spec.passwordSecret", "name")
		ns := r.str(ps, "spec.passwordSecret", "namespace")
		if ns == "" {
			ns = o.Namespace
		}
		switch {
		case p.Password != "":
			r.fail("spec.passwordSecret", "cannot be set with spec.password")
		case name == "":
			r.fail("spec.passwordSecret.name", "is required")
		case password == nil:
			r.fail("spec.passwordSecret", "cannot be read")
		default:
			pw, err := password(ns, name)
			if err != nil {
				r.fail("spec.passwordSecret", "%v", err)
			}
			p.Password = pw
		}
	}
	var unsupported []string
	if v := r.str(o.Spec, "spec", "vrf"); v != "" {
		unsupported = append(unsupported, "spec.vrf")
	}
	if v, _ := r.boolean(o.Spec, "spec", "disableMP"); v {
		unsupported = append(unsupported, "spec.disableMP")
	}
	if v := r.str(o.Spec, "spec", "dynamicASN"); v != "" {
		unsupported = append(unsupported, "spec.dynamicASN")
	}
	return p, unsupported, r.err()
}

// BFDProfile converts a BFDProfile (intervals in milliseconds).
func BFDProfile(o Object) (*ipamv1.BFDProfile, error) {
	var r reader
	b := &ipamv1.BFDProfile{
		ReceiveInterval:  r.millis(o.Spec, "spec", "receiveInterval", 10, 60000),
		TransmitInterval: r.millis(o.Spec, "spec", "transmitInterval", 10, 60000),
		EchoInterval:     r.millis(o.Spec, "spec", "echoInterval", 10, 60000),
	}
	if n, ok := r.integer(o.Spec, "spec", "detectMultiplier", 2, 255); ok {
		b.DetectMultiplier = uint32(n)
	}
	if n, ok := r.integer(o.Spec, "spec", "minimumTtl", 1, 254); ok {
		b.MinimumTtl = uint32(n)
	}
	b.EchoMode, _ = r.boolean(o.Spec, "spec", "echoMode")
	b.PassiveMode, _ = r.boolean(o.Spec, "spec", "passiveMode")
	return b, r.err()
}

// Community converts a Community (named community values).
func Community(o Object) (*ipamv1.Community, error) {
	var r reader
	c := &ipamv1.Community{}
	for i, e := range r.objects(o.Spec, "spec", "communities") {
		p := fmt.Sprintf("spec.communities[%d]", i)
		c.Aliases = append(c.Aliases, &ipamv1.CommunityAlias{Name: r.str(e, p, "name"), Value: r.str(e, p, "value")})
	}
	return c, r.err()
}

// PoolStatus returns an IPAddressPool's status fields (assignedIPv4,
// assignedIPv6, availableIPv4, availableIPv6) from the IPAM pool's usage.
// Counts beyond int64 (a large IPv6 pool) are capped.
func PoolStatus(st *ipamv1.PoolStatus) map[string]any {
	out := map[string]any{"assignedIPv4": int64(0), "assignedIPv6": int64(0), "availableIPv4": int64(0), "availableIPv6": int64(0)}
	for _, f := range st.GetFamilies() {
		suffix := "IPv4"
		if f.GetFamily() == ipamv1.IPFamily_IP_FAMILY_IPV6 {
			suffix = "IPv6"
		}
		used := f.GetUsed()
		if used > math.MaxInt64 {
			used = math.MaxInt64
		}
		out["assigned"+suffix] = int64(used)
		free, ok := new(big.Int).SetString(f.GetFree(), 10)
		switch {
		case !ok:
		case free.IsInt64():
			out["available"+suffix] = free.Int64()
		default:
			out["available"+suffix] = int64(math.MaxInt64)
		}
	}
	return out
}
