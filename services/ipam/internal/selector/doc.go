// Package selector owns Beacon's label selectors, label sets and the rules for
// label keys and values.
//
// A Selector is a Kubernetes-style label selector held as a plain Go value,
// with no Kubernetes dependency, and with the meaning MetalLB gives to an
// address pool's namespaceSelectors and serviceSelectors: every term of a
// selector must hold, an empty selector matches everything, and of a list of
// selectors at least one must match (an empty list matches everything).
//
// Callers convert the API's LabelSelector messages into Selector values, call
// Validate once when the selector is written, and Matches when it is used.
// A Set is a label set held compactly, as an allocation keeps its owner's
// labels; AnyMatchesSet matches it as AnyMatches matches a map.
package selector
