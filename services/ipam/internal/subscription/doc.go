// Package subscription runs one announcer's session with the IPAM: the
// node's registration, tied to the replica's one etcd lease
// (ReplicaLease, shared by every session of the replica) and written only
// while the session holds it, the heartbeats it must send and their watchdog, the L2
// rights granted by acknowledging them, the plans it is streamed (a
// snapshot, then changes), the status and interface reports written back to
// its registration (only on change, rate-limited), and the end of the
// session: deleting the registration, or leaving it to expire with the
// replica's lease when the replica
// stops. It speaks in domain types; the gRPC handler converts the messages
// of the stream and turns the session's end into a status.
package subscription
