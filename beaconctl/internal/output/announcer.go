package output

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Protocol is the short name of an announcement protocol: "L2" or "BGP".
func Protocol(p ipamv1.AnnouncementProtocol) string {
	return strings.TrimPrefix(p.String(), "ANNOUNCEMENT_PROTOCOL_")
}

// SessionState is the short name of a BGP session state: "ESTABLISHED".
func SessionState(s ipamv1.BGPSessionStatus_State) string {
	return strings.TrimPrefix(s.String(), "STATE_")
}

// NodeName is the node of an announcer name: "n1" for
// "tenants/acme/announcers/n1". Other text is returned as it is.
func NodeName(announcer string) string {
	if _, node, ok := strings.Cut(announcer, "/announcers/"); ok && node != "" {
		return node
	}
	return announcer
}

// Announcements renders which nodes announce an allocation and how:
// "n1(L2 198.51.100.1),n2(BGP 198.51.100.2/32)", or "n1(L2)" from a
// server that does not say which address; "" when none does.
func Announcements(anns []*ipamv1.AllocationAnnouncement) string {
	out := make([]string, len(anns))
	for i, a := range anns {
		how := Protocol(a.GetProtocol())
		if a.GetAddress() != "" {
			how += " " + a.GetAddress()
		}
		out[i] = NodeName(a.GetAnnouncer()) + "(" + how + ")"
	}
	return strings.Join(out, ",")
}

// AllocationDetailTable writes allocations as AllocationTable does, with an
// ANNOUNCED-BY column: the nodes that announce the addresses, each with its
// protocol.
func AllocationDetailTable(w io.Writer, allocs []*ipamv1.Allocation) error {
	rows := make([][]string, 0, len(allocs))
	for _, a := range allocs {
		rows = append(rows, []string{
			a.GetName(),
			a.GetOwner(),
			strings.Join(a.GetAddresses(), ","),
			a.GetPool(),
			Timestamp(a.GetExpireTime()),
			Announcements(a.GetAnnouncements()),
		})
	}
	if err := writeRows(w, []string{"NAME", "OWNER", "ADDRESSES", "POOL", "EXPIRES", "ANNOUNCED-BY"}, rows); err != nil {
		return err
	}
	return conditionLines(w, allocs)
}

// conditionLines writes, after an allocation table, one line per condition
// of the allocations (another host using an L2 address, say), or nothing
// when there is none:
//
//	Conflict: default/web 192.0.2.5 on n1/eth0, MAC 02:00:00:00:00:09: another host ...
func conditionLines(w io.Writer, allocs []*ipamv1.Allocation) error {
	for _, a := range allocs {
		for _, c := range a.GetConditions() {
			if _, err := fmt.Fprintf(w, "%s: %s %s on %s/%s, MAC %s: %s\n", c.GetType(), a.GetOwner(), c.GetAddress(),
				NodeName(c.GetAnnouncer()), c.GetInterface(), c.GetHardwareAddress(), c.GetMessage()); err != nil {
				return err
			}
		}
	}
	return nil
}

// interfaceNames renders a node's interfaces by name, marking those that
// are down: "eth0,eth1(down)".
func interfaceNames(ifs []*ipamv1.NetworkInterface) string {
	out := make([]string, len(ifs))
	for i, nic := range ifs {
		out[i] = nic.GetName()
		if !nic.GetUp() {
			out[i] += "(down)"
		}
	}
	return strings.Join(out, ",")
}

// sessionsCell is ESTABLISHED/TOTAL BGP sessions, or "" for none.
func sessionsCell(sessions []*ipamv1.BGPSessionStatus) string {
	if len(sessions) == 0 {
		return ""
	}
	up := 0
	for _, s := range sessions {
		if s.GetState() == ipamv1.BGPSessionStatus_STATE_ESTABLISHED {
			up++
		}
	}
	return fmt.Sprintf("%d/%d", up, len(sessions))
}

// AnnouncerTable writes announcers as a table: NAME LIVE DRAINING
// INTERFACES ANNOUNCED SESSIONS. INTERFACES marks those that are down,
// ANNOUNCED counts the addresses the node reports it announces and SESSIONS
// is its established/configured BGP sessions.
func AnnouncerTable(w io.Writer, anns []*ipamv1.Announcer) error {
	rows := make([][]string, 0, len(anns))
	for _, a := range anns {
		rows = append(rows, []string{
			a.GetName(),
			strconv.FormatBool(a.GetLive()),
			strconv.FormatBool(a.GetDraining()),
			interfaceNames(a.GetInterfaces()),
			strconv.Itoa(len(a.GetStatus().GetAnnounced())),
			sessionsCell(a.GetStatus().GetSessions()),
		})
	}
	return writeRows(w, []string{"NAME", "LIVE", "DRAINING", "INTERFACES", "ANNOUNCED", "SESSIONS"}, rows)
}

// AnnouncerDetails describes one announcer for people: its state and
// labels, then its interfaces, each address it announces with the protocol
// and the interfaces (L2) or peers (BGP), and each BGP session with its
// state and BFD: "up", or "-" when BFD is down or not configured (the API
// does not tell these apart).
func AnnouncerDetails(w io.Writer, a *ipamv1.Announcer) error {
	labels := a.GetLabels()
	kv := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	head := [][]string{
		{"Name:", a.GetName()},
		{"Live:", strconv.FormatBool(a.GetLive())},
		{"Connected:", Timestamp(a.GetConnectTime())},
		{"Draining:", strconv.FormatBool(a.GetDraining())},
		{"Excluded:", strconv.FormatBool(a.GetExcluded())},
		{"Labels:", strings.Join(kv, ",")},
	}
	tw := newTabWriter(w)
	for _, r := range head {
		if r[1] == "" {
			r[1] = none
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	ifRows := make([][]string, 0, len(a.GetInterfaces()))
	for _, nic := range a.GetInterfaces() {
		state := "down"
		if nic.GetUp() {
			state = "up"
		}
		ifRows = append(ifRows, []string{nic.GetName(), state, nic.GetHardwareAddress(), strings.Join(nic.GetAddresses(), ",")})
	}
	if err := section(w, "Interfaces", []string{"NAME", "STATE", "MAC", "ADDRESSES"}, ifRows); err != nil {
		return err
	}

	addrRows := make([][]string, 0, len(a.GetStatus().GetAnnounced()))
	for _, ad := range a.GetStatus().GetAnnounced() {
		via := ad.GetInterfaces()
		if ad.GetProtocol() == ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP {
			via = ad.GetPeers()
		}
		addrRows = append(addrRows, []string{ad.GetAddress(), Protocol(ad.GetProtocol()), strings.Join(via, ",")})
	}
	if err := section(w, "Announced", []string{"ADDRESS", "PROTOCOL", "INTERFACES/PEERS"}, addrRows); err != nil {
		return err
	}

	sessRows := make([][]string, 0, len(a.GetStatus().GetSessions()))
	for _, s := range a.GetStatus().GetSessions() {
		bfd := ""
		if s.GetBfdUp() {
			bfd = "up"
		}
		sessRows = append(sessRows, []string{
			s.GetPeer(),
			SessionState(s.GetState()),
			bfd,
			Timestamp(s.GetSince()),
			strconv.FormatUint(uint64(s.GetAdvertisedPrefixes()), 10),
		})
	}
	if err := section(w, "BGP sessions", []string{"PEER", "STATE", "BFD", "SINCE", "PREFIXES"}, sessRows); err != nil {
		return err
	}
	// Conflicts, only when there are: other hosts using the node's L2
	// addresses. "probe": found before answering (not answered there);
	// "claim": another host claimed an address the node answers for.
	conflicts := a.GetStatus().GetConflicts()
	if len(conflicts) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(conflicts))
	for _, c := range conflicts {
		how := "claim"
		if c.GetBeforeAnswering() {
			how = "probe"
		}
		rows = append(rows, []string{c.GetAddress(), c.GetInterface(), c.GetHardwareAddress(), how, Timestamp(c.GetFirstSeenTime())})
	}
	return section(w, "Conflicts", []string{"ADDRESS", "INTERFACE", "OTHER-MAC", "FOUND-BY", "SINCE"}, rows)
}

// section writes a blank line, "TITLE:" and an indented table, or
// "TITLE: none" when there are no rows.
func section(w io.Writer, title string, header []string, rows [][]string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "\n%s: none\n", title)
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%s:\n", title); err != nil {
		return err
	}
	header = slices.Clone(header)
	header[0] = "  " + header[0]
	for _, r := range rows {
		if r[0] == "" {
			r[0] = none
		}
		r[0] = "  " + r[0]
	}
	return writeRows(w, header, rows)
}
