// Package assign decides what an allocation gets, and what a release,
// renewal, update or expiry changes: pool choice (a requested pool, or the
// candidate pools in order), families, sharing an address under a sharing
// key or a global group, taking back a released owner's hold, specific
// addresses, quotas, and the search for the lowest free address. Each
// decision is a Decision: the change to commit, with the conditions that
// make it safe against a stale view, and the free addresses it takes.
//
// It is pure: it reads a replica's state through State (the index, under
// its lock) and writes nothing; it imports no storage and no transport.
// The allocator asks it for a decision, commits the decision's change and
// retries on conflict.
package assign
