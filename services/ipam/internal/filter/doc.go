// Package filter owns the list filters of Beacon's List methods: a small
// subset of Google AIP-160.
//
// A filter is a conjunction of terms joined by the upper-case keyword AND:
//
//	FIELD = VALUE      the field equals VALUE
//	FIELD != VALUE     the field is missing or differs from VALUE
//	FIELD:*            the field is present and not empty
//
// FIELD is a lower-case identifier such as pool or sharing_key, or
// labels.KEY (also written labels."KEY") for the label KEY. VALUE is a
// double-quoted string, in which \" and \\ are the only escapes, or a bare
// word of letters, digits and _ . : / - (so addresses such as 192.0.2.1 or
// 2001:db8::1 need no quotes). Whitespace between tokens is optional. An
// empty filter matches everything.
//
// Parse checks a filter against the fields a List method supports; Match
// applies it to one object; Value lets the method use an index for an
// equality term; String renders it canonically.
package filter
