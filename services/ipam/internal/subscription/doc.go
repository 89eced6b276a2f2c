// Package subscription runs one announcer's session with the IPAM: the
// node's registration under a node lease kept alive for as long as the
// session lasts, the heartbeats it must send and their watchdog, the L2
// rights granted by acknowledging them, the plans it is streamed (a
// snapshot, then changes), the status and interface reports written back to
// its registration (only on change, rate-limited), and the end of the
// session: revoking the lease, or leaving it to expire when the replica
// stops. It speaks in domain types; the gRPC handler converts the messages
// of the stream and turns the session's end into a status.
package subscription
