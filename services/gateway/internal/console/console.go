// Package console is Beacon's web console: a single-page app of plain ES
// modules (no framework, no bundler, no build step) embedded in gatewayd and
// served by Handler at every path the gateway does not route to its API.
// The app calls the gateway's REST API (/v1/...) from the browser with the
// bearer token the user signs in with.
//
// Paths: "/" (and "/index.html") is the page, revalidated on every load;
// the scripts, style sheet and icon are under "/assets/{hash}/", where hash
// is a digest of every embedded file, so they are cached for a year and a
// new build changes their URLs. Every response carries a strict
// Content-Security-Policy: scripts and styles from the gateway only, no
// inline code, and Trusted Types so that no string ever becomes markup.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// indexFile is the page; the others are assets.
const indexFile = "index.html"

// assetsPlaceholder is replaced in index.html by the assets' base path.
const assetsPlaceholder = "{{assets}}"

// Handler returns the console's HTTP handler. It answers GET and HEAD only;
// paths it does not know get 404.
func Handler() http.Handler {
	s := loadSite()
	return http.HandlerFunc(s.serveHTTP)
}

// loadSite reads the embedded files once per process.
var loadSite = sync.OnceValue(func() *site {
	s, err := newSite(static)
	if err != nil {
		panic("console: " + err.Error()) // the embedded files are fixed at build time
	}
	return s
})

// serveHTTP serves one request.
func (s *site) serveHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := s.lookup(r.URL.Path)
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", a.cacheControl)
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}

// lookup finds the file for a request path.
func (s *site) lookup(p string) (*asset, bool) {
	if p == "/" || p == "/"+indexFile {
		return s.index, true
	}
	rest, ok := strings.CutPrefix(p, s.base)
	if !ok {
		return nil, false
	}
	a, ok := s.assets[rest]
	return a, ok
}

// site is the embedded files, ready to serve.
type site struct {
	index  *asset
	assets map[string]*asset // by path below base
	base   string            // "/assets/{hash}/"
}

// asset is one file and its response headers.
type asset struct {
	name, contentType, cacheControl, etag string
	body                                  []byte
}

// Cache policies: the page is revalidated on every load (a cheap 304 by
// ETag), the assets, whose URLs change with their content, never are.
const (
	cachePage  = "no-cache"
	cacheAsset = "public, max-age=31536000, immutable"
)

// newSite reads every file under static/ in fsys.
func newSite(fsys fs.FS) (*site, error) {
	root, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var names []string
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		files[p], names = b, append(names, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, ok := files[indexFile]; !ok {
		return nil, fmt.Errorf("static/%s is missing", indexFile)
	}
	sum := sha256.New()
	for _, n := range names { // WalkDir walks in lexical order
		fmt.Fprintf(sum, "%s\x00%d\x00", n, len(files[n]))
		sum.Write(files[n])
	}
	s := &site{assets: map[string]*asset{}, base: "/assets/" + hex.EncodeToString(sum.Sum(nil))[:16] + "/"}
	for _, n := range names {
		ct, ok := contentTypes[path.Ext(n)]
		if !ok {
			return nil, fmt.Errorf("static/%s: no content type for %q", n, path.Ext(n))
		}
		body := files[n]
		if n == indexFile {
			body = bytes.ReplaceAll(body, []byte(assetsPlaceholder), []byte(strings.TrimSuffix(s.base, "/")))
			s.index = newAsset(n, ct, cachePage, body)
			continue
		}
		s.assets[n] = newAsset(n, ct, cacheAsset, body)
	}
	return s, nil
}

// newAsset makes an asset with a strong ETag of its body.
func newAsset(name, contentType, cacheControl string, body []byte) *asset {
	sum := sha256.Sum256(body)
	return &asset{
		name: name, contentType: contentType, cacheControl: cacheControl, body: body,
		etag: `"` + hex.EncodeToString(sum[:])[:32] + `"`,
	}
}

// contentTypes are the types of the files the console is made of; a file
// of any other kind fails newSite, and so the package's tests.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}
