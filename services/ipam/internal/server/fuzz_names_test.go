package server

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// nameParser is one of the server's resource-name parsers, with the way
// its accepted names render back.
type nameParser struct {
	field string
	// parse returns the parts of the name; render builds the name from them.
	parse  func(fes *ipam.FieldErrors, name string) []string
	render func(parts []string) string
}

func nameParsers() []nameParser {
	a := newAnnouncementService(nil)
	tok := &tokenService{}
	ps := []nameParser{
		{"pool", func(fes *ipam.FieldErrors, n string) []string { return []string{parsePoolName(fes, "pool", n)} },
			func(p []string) string { return "pools/" + p[0] }},
		{"parent", func(fes *ipam.FieldErrors, n string) []string { return []string{parseParent(fes, "parent", n, false)} },
			func(p []string) string { return "tenants/" + p[0] }},
		{"parent", func(fes *ipam.FieldErrors, n string) []string { return []string{parseParent(fes, "parent", n, true)} },
			func(p []string) string { return "tenants/" + p[0] }},
		{"name", func(fes *ipam.FieldErrors, n string) []string {
			t, id := parseAllocationName(fes, "name", n)
			return []string{t, id}
		}, func(p []string) string { return "tenants/" + p[0] + "/allocations/" + p[1] }},
		{"name", func(fes *ipam.FieldErrors, n string) []string {
			t, node := parseAnnouncerName(fes, n)
			return []string{t, node}
		}, func(p []string) string { return "tenants/" + p[0] + "/announcers/" + p[1] }},
		{"name", func(fes *ipam.FieldErrors, n string) []string { return []string{tok.parseName(fes, n)} },
			func(p []string) string { return "tokens/" + p[0] }},
	}
	type namer interface {
		parseName(fes *ipam.FieldErrors, field, name string) (string, string)
	}
	for _, k := range []struct {
		n    namer
		coll string
	}{
		{a.l2, a.l2.collection}, {a.bgpAdv, a.bgpAdv.collection}, {a.peer, a.peer.collection},
		{a.bfd, a.bfd.collection}, {a.community, a.community.collection}, {a.node, a.node.collection},
	} {
		ps = append(ps, nameParser{"name", func(fes *ipam.FieldErrors, n string) []string {
			t, id := k.n.parseName(fes, "name", n)
			return []string{t, id}
		}, func(p []string) string { return configName(p[0], k.coll, p[1]) }})
	}
	return ps
}

// FuzzResourceNames feeds arbitrary names to every resource-name parser of
// the server (pools/P, tenants/T, tenants/-, tenants/T/allocations/A,
// tenants/T/announcers/N, tokens/K and tenants/T/{collection}/ID for each
// announcement collection). A refused name gets exactly one error naming
// the field; an accepted one is canonical: its parts render back to exactly
// the name given, and none of them is empty or holds a '/'.
func FuzzResourceNames(f *testing.F) {
	parsers := nameParsers()
	f.Fuzz(func(t *testing.T, which uint8, name string) {
		p := parsers[int(which)%len(parsers)]
		var fes ipam.FieldErrors
		parts := p.parse(&fes, name)
		if len(fes) > 0 {
			if len(fes) != 1 || fes[0].Field != p.field || fes[0].Reason == "" {
				t.Fatalf("parser %d: %q: errors %v, want one naming %q", which, name, fes, p.field)
			}
			return
		}
		for _, part := range parts {
			if part == "" || strings.Contains(part, "/") {
				t.Fatalf("parser %d: %q accepted with parts %q", which, name, parts)
			}
		}
		if got := p.render(parts); got != name {
			t.Fatalf("parser %d: %q accepted as %q, which renders as %q", which, name, parts, got)
		}
	})
}

// FuzzTokens checks the opaque strings the API hands out and takes back:
// etags, watch resume tokens and page tokens. What the server renders
// parses back to the same value; what it accepts is exactly what it
// renders (no second spelling of one revision, no page token it did not
// make, none for another listing or from another key); a refusal names
// the field.
func FuzzTokens(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, rev int64, after string, query uint64) {
		// Etags.
		var fes ipam.FieldErrors
		if v := parseEtag(&fes, "etag", s); len(fes) > 0 {
			if len(fes) != 1 || fes[0].Field != "etag" || v != 0 {
				t.Fatalf("parseEtag(%q) = %d, errors %v", s, v, fes)
			}
		} else if s != "" && (v <= 0 || etag(v) != s && strings.Trim(etag(v), `"`) != s) {
			t.Fatalf("parseEtag(%q) = %d, which renders as %s", s, v, etag(v))
		}
		if rev > 0 {
			fes = nil
			if v := parseEtag(&fes, "etag", etag(rev)); v != rev || len(fes) > 0 {
				t.Fatalf("parseEtag(etag(%d) = %s) = %d, %v", rev, etag(rev), v, fes)
			}
		}

		// Resume tokens.
		fes = nil
		if v := parseResumeToken(&fes, s); len(fes) > 0 {
			if len(fes) != 1 || fes[0].Field != "resume_token" || v != 0 {
				t.Fatalf("parseResumeToken(%q) = %d, errors %v", s, v, fes)
			}
		} else if s != "" && (v <= 0 || resumeToken(v) != s) {
			t.Fatalf("parseResumeToken(%q) = %d, which renders as %s", s, v, resumeToken(v))
		}
		if rev > 0 {
			fes = nil
			if v := parseResumeToken(&fes, resumeToken(rev)); v != rev || len(fes) > 0 {
				t.Fatalf("parseResumeToken(resumeToken(%d)) = %d, %v", rev, v, fes)
			}
		}

		// Page tokens: arbitrary text, and a token the server made.
		pg, other := pager{key: []byte("fuzz-key")}, pager{key: []byte("other-key")}
		fes = nil
		if got := pg.decode(&fes, "page_token", s, query); len(fes) > 0 {
			if len(fes) != 1 || fes[0].Field != "page_token" || got != "" {
				t.Fatalf("decode(%q) = %q, errors %v", s, got, fes)
			}
		} else if s != "" && (got == "" || pg.encode(got, query) != s) {
			t.Fatalf("decode(%q) = %q: accepted a token the server did not make", s, got)
		}
		if after == "" || !utf8.ValidString(after) {
			return // positions are IDs and keys: never empty, always UTF-8
		}
		tok := pg.encode(after, query)
		fes = nil
		if got := pg.decode(&fes, "page_token", tok, query); got != after || len(fes) > 0 {
			t.Fatalf("decode(encode(%q)) = %q, %v", after, got, fes)
		}
		for _, bad := range []struct {
			p     pager
			query uint64
		}{{pg, query + 1}, {other, query}} {
			fes = nil
			if got := bad.p.decode(&fes, "page_token", tok, bad.query); got != "" || len(fes) != 1 || fes[0].Field != "page_token" {
				t.Fatalf("a page token was accepted for another query or key: %q, %v", got, fes)
			}
		}
	})
}
