// Package robustness proves the IPAM's promises under faults, the way etcd
// proves its own: many clients call a cluster of real ipamd replicas on a
// 3-member etcd cluster of real processes while replicas and etcd members
// are killed, frozen and cut off; every call is recorded (when it was made,
// when it was answered, what it asked and what it was told) and the
// history is checked with porcupine against a model of pools, owners,
// holds and TTLs, then the final state is audited.
//
// A history is linearizable when some order of its operations, each taking
// effect at one instant between its call and its answer, explains every
// answer by the model. An operation whose outcome is unknown (a time-out,
// a lost connection) may take effect at any instant up to GhostWindow
// after its call, or never. A retried request_id makes the retries one
// operation from the first call to the final answer.
package robustness
