package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// pager makes and checks page tokens. A token is opaque to clients and
// authenticated: base64url(JSON{after, query}) "." base64url(HMAC-SHA256),
// with a key every replica shares (kept in etcd), so that a token from any
// replica works on any other, and a forged or altered one is refused. The
// query it is bound to hashes the method, the parent (so the caller's
// tenant) and the filter: no token lets a caller continue another listing,
// let alone walk keys outside its tenant.
type pager struct {
	key []byte
}

// pageToken is what a next_page_token carries: where to continue, and a
// hash of the request it belongs to.
type pageToken struct {
	After string `json:"a"`
	Query uint64 `json:"q"`
}

// queryHash binds a token to a listing: the method and every request
// field that selects what is listed.
func queryHash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

func (p pager) mac(payload string) string {
	m := hmac.New(sha256.New, p.key)
	_, _ = m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

func (p pager) encode(after string, query uint64) string {
	b, _ := json.Marshal(pageToken{After: after, Query: query}) // always encodes
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + p.mac(payload)
}

func (p pager) decode(fes *ipam.FieldErrors, field, tok string, query uint64) string {
	if tok == "" {
		return ""
	}
	payload, sum, ok := strings.Cut(tok, ".")
	if !ok || !hmac.Equal([]byte(sum), []byte(p.mac(payload))) {
		fes.Add(field, "is not a page token returned by this API")
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	var pt pageToken
	if err != nil || json.Unmarshal(b, &pt) != nil || pt.After == "" {
		fes.Add(field, "is not a page token returned by this API")
		return ""
	}
	if pt.Query != query {
		fes.Add(field, "belongs to another listing (method, parent or filter)")
		return ""
	}
	return pt.After
}
