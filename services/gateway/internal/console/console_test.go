package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// response is what the handler answered.
type response struct {
	StatusCode int
	Header     http.Header
	body       string
}

// get serves one request with the console handler; header is pairs of
// names and values.
func get(t *testing.T, method, path string, header ...string) response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	return response{StatusCode: w.Code, Header: w.Header(), body: w.Body.String()}
}

// body returns a response's body.
func body(_ *testing.T, res response) string { return res.body }

// assetPaths returns the asset URLs index.html refers to.
func assetPaths(t *testing.T) []string {
	t.Helper()
	page := body(t, get(t, "GET", "/"))
	paths := regexp.MustCompile(`(?:src|href)="(/assets/[0-9a-f]{16}/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(paths) < 3 {
		t.Fatalf("index.html refers to %d assets, want the icon, style sheet and script:\n%s", len(paths), page)
	}
	var out []string
	for _, m := range paths {
		out = append(out, m[1])
	}
	return out
}

func TestPageAndAssets(t *testing.T) {
	for _, p := range []string{"/", "/index.html"} {
		res := get(t, "GET", p)
		b := body(t, res)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("GET %s = %d %q", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("ETag") == "" {
			t.Errorf("GET %s: Cache-Control %q, ETag %q; want no-cache with an ETag", p, res.Header.Get("Cache-Control"), res.Header.Get("ETag"))
		}
		if strings.Contains(b, assetsPlaceholder) || !strings.Contains(b, `<script type="module" src="/assets/`) {
			t.Errorf("GET %s: the asset placeholder is not replaced:\n%s", p, b)
		}
	}
	wantType := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
		".svg": "image/svg+xml",
	}
	for _, p := range assetPaths(t) {
		res := get(t, "GET", p)
		b := body(t, res)
		ext := p[strings.LastIndex(p, "."):]
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != wantType[ext] || b == "" {
			t.Errorf("GET %s = %d %q (%d bytes), want 200 %q", p, res.StatusCode, res.Header.Get("Content-Type"), len(b), wantType[ext])
		}
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") || !strings.Contains(cc, "max-age=31536000") {
			t.Errorf("GET %s: Cache-Control %q, want a year, immutable", p, cc)
		}
	}
}

// Every module the app imports is served from the same versioned folder.
func TestModulesResolve(t *testing.T) {
	paths := assetPaths(t)
	base := paths[0][:strings.LastIndex(paths[0], "/")+1]
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	seen := map[string]bool{}
	queue := []string{"app.js"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		res := get(t, "GET", base+name)
		src := body(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("module %s = %d", name, res.StatusCode)
		}
		for _, m := range imports.FindAllStringSubmatch(src, -1) {
			queue = append(queue, m[1])
		}
	}
	if len(seen) < 5 {
		t.Errorf("only %d modules reachable from app.js: %v", len(seen), seen)
	}
}

func TestSecurityHeaders(t *testing.T) {
	for _, p := range append([]string{"/", "/nope.js"}, assetPaths(t)...) {
		res := get(t, "GET", p)
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", p, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", p, res.Header)
		}
	}
}

// The CSP forbids inline code, so the files must have none.
func TestNoInlineCode(t *testing.T) {
	page := body(t, get(t, "GET", "/"))
	if m := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>|\son[a-z]+=|\sstyle=|<style`).FindString(page); m != "" {
		t.Errorf("index.html has inline code %q, which the CSP blocks", m)
	}
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(`)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := fs.ReadFile(static, p)
		if m := sinks.Find(src); m != nil {
			t.Errorf("%s uses %q, which Trusted Types refuse", p, m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	for _, p := range []string{"/app.js", "/nope", "/assets/", "/assets/0000000000000000/app.js", "/static/app.js", "/index.htm", "/favicon.ico"} {
		res := get(t, "GET", p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p, cc)
		}
	}
	{
		p := assetPaths(t)[0]
		if res := get(t, "GET", p[:strings.LastIndex(p, "/")+1]+"nope.js"); res.StatusCode != http.StatusNotFound {
			t.Errorf("unknown asset = %d, want 404", res.StatusCode)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		res := get(t, m, "/")
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s / = %d Allow %q, want 405 GET, HEAD", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
	res := get(t, "HEAD", "/")
	if b := body(t, res); res.StatusCode != http.StatusOK || b != "" || res.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD / = %d, %d bytes, Content-Length %q", res.StatusCode, len(b), res.Header.Get("Content-Length"))
	}
}

func TestConditionalGet(t *testing.T) {
	for _, p := range []string{"/", assetPaths(t)[0]} {
		etag := get(t, "GET", p).Header.Get("ETag")
		if res := get(t, "GET", p, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %s = %d, want 304", p, etag, res.StatusCode)
		}
		if res := get(t, "GET", p, "If-None-Match", `"other"`); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a stale ETag = %d, want 200", p, res.StatusCode)
		}
	}
}

// The asset folder's name changes with any file's content.
func TestAssetHashFollowsContent(t *testing.T) {
	files := func(app string) fstest.MapFS {
		return fstest.MapFS{
			"static/index.html": {Data: []byte(`<script type="module" src="{{assets}}/app.js"></script>`)},
			"static/app.js":     {Data: []byte(app)},
		}
	}
	a, err := newSite(files("one"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSite(files("two"))
	if err != nil {
		t.Fatal(err)
	}
	if a.base == b.base || !strings.Contains(string(a.index.body), a.base+"app.js") {
		t.Errorf("bases %q and %q; index %q", a.base, b.base, a.index.body)
	}
	if _, err := newSite(fstest.MapFS{"static/index.html": {}, "static/x.exe": {}}); err == nil {
		t.Error("a file of unknown type was accepted")
	}
	if _, err := newSite(fstest.MapFS{"static/app.js": {}}); err == nil {
		t.Error("a site without index.html was accepted")
	}
}
