package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
)

// observe exports the announcer's state as OpenTelemetry instruments read
// at each collection: BGP sessions by state, prefixes advertised, and the
// L2 responder's counters per family, and whether the node's right to
// answer is valid.
func observe(m metric.Meter, speaker *bgp.Speaker, responder *l2.Responder, rights l2.Rights) error {
	sessions, err1 := m.Int64ObservableGauge("beacon.announcer.bgp.sessions", metric.WithDescription("BGP sessions by state"))
	prefixes, err2 := m.Int64ObservableGauge("beacon.announcer.bgp.advertised_prefixes", metric.WithDescription("Prefixes advertised per peer"))
	requests, err3 := m.Int64ObservableCounter("beacon.announcer.l2.requests", metric.WithDescription("ARP requests / neighbor solicitations seen"))
	replies, err4 := m.Int64ObservableCounter("beacon.announcer.l2.replies", metric.WithDescription("ARP replies / neighbor advertisements sent"))
	announcements, err5 := m.Int64ObservableCounter("beacon.announcer.l2.announcements", metric.WithDescription("Gratuitous ARP / unsolicited NA frames sent"))
	withheld, err6 := m.Int64ObservableCounter("beacon.announcer.l2.withheld", metric.WithDescription("Replies and announcements not sent: the node's right to answer had run out (frozen, stalled or cut off from the IPAM)"))
	valid, err7 := m.Int64ObservableGauge("beacon.announcer.l2.right_valid", metric.WithDescription("1 while the IPAM's grant lets the node answer for its L2 addresses, else 0"))
	conflicts, err8 := m.Int64ObservableCounter("beacon.announcer.l2.conflicts", metric.WithDescription("Other hosts found using an L2 address of the node's plan (ARP probe or DAD before answering, or a claim on an answered address)"))
	probes, err9 := m.Int64ObservableCounter("beacon.announcer.l2.probes", metric.WithDescription("ARP probes / DAD solicitations sent before answering for a new address"))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8, err9); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		byState := map[string]int64{}
		for _, s := range speaker.Sessions() {
			byState[s.State]++
			o.ObserveInt64(prefixes, int64(s.Advertised), metric.WithAttributes(attribute.String("peer", s.Peer)))
		}
		for state, n := range byState {
			o.ObserveInt64(sessions, n, metric.WithAttributes(attribute.String("state", state)))
		}
		st := responder.Stats()
		for fam, f := range map[string]l2.FamilyStats{"ipv4": st.IPv4, "ipv6": st.IPv6} {
			attrs := metric.WithAttributes(attribute.String("family", fam))
			o.ObserveInt64(requests, int64(f.Requests), attrs)
			o.ObserveInt64(replies, int64(f.Replies), attrs)
			o.ObserveInt64(announcements, int64(f.Announcements), attrs)
			o.ObserveInt64(withheld, int64(f.Withheld), attrs)
			o.ObserveInt64(conflicts, int64(f.Conflicts), attrs)
			o.ObserveInt64(probes, int64(f.Probes), attrs)
		}
		v := int64(0)
		if rights.Valid() {
			v = 1
		}
		o.ObserveInt64(valid, v)
		return nil
	}, sessions, prefixes, requests, replies, announcements, withheld, valid, conflicts, probes)
	return err
}
