package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestConsole drives the web console in headless Chromium against the real
// stack, ipamd (embedded etcd) and gatewayd (TLS with development
// certificates, bootstrap admin token), on loopback: sign in, a refused
// pool with its field violation shown, a pool created through the form, an
// allocation made through the REST API appearing in the allocations table
// without a reload (watch stream), the search filters, pool utilization,
// the audit log, the announcers page and sign-out. It fails on any script
// exception or Content-Security-Policy violation in the page, and saves
// screenshots into $BEACON_ARTIFACTS (default artifacts/ at the repo root).
//
// It takes gatewayd from $BEACON_BIN or builds it, and Chromium from
// $BEACON_CHROMIUM or /usr/bin/chromium (Debian's package, which it
// installs when it runs as root). Without gatewayd, without Chromium, or
// with a gatewayd that does not mount the console, it skips and says why
// (go test -v shows it; a passing package without -v shows no skips):
//
//	go test -v -run TestConsole ./tests/integration
func TestConsole(t *testing.T) {
	gatewaydBin := gatewaydBinary(t)
	chromium := chromiumPath(t)
	ipamd := startIPAMD(t, "--data-dir", t.TempDir())
	gw := startGatewayd(t, gatewaydBin, ipamd.grpc)
	gw.requireConsole(t)

	_ = os.Remove(filepath.Join(artifactsDir(t), "console-failure.png")) // from an earlier run
	ctx, problems := newBrowser(t, chromium)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			shot(t, ctx, "console-failure")
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The page re-renders on its own (the announcers page refreshes,
		// the allocations table follows its stream): a node found by the
		// query can be replaced before its text is read ("No node with
		// given id found"). Read again until the deadline.
		for {
			s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
			if err == nil {
				return s
			}
			if sctx.Err() != nil || !strings.Contains(err.Error(), "No node with given id") {
				shot(t, ctx, "console-failure")
				t.Fatalf("read %s: %v", sel, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return s
	}
	submit := chromedp.Click(chromedp.CSS(`main form button[type="submit"]`))
	// look saves a screenshot and checks that the page shows no rendering
	// slip such as "null" or "[object Object]".
	look := func(name string) {
		t.Helper()
		shot(t, ctx, name)
		if junk := eval(`(document.body.innerText.match(/\b(null|undefined|NaN)\b|\[object \w+\]/) ?? [''])[0]`); junk != "" {
			t.Errorf("%s: the page shows %q:\n%s", name, junk, eval(`document.body.innerText`))
		}
	}

	// Sign in with the bootstrap admin token.
	do("open the console", chromedp.Navigate(gw.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	look("console-sign-in")
	do("sign in",
		chromedp.SendKeys(chromedp.ID("token"), gw.token),
		submit,
		chromedp.WaitVisible(chromedp.CSS(`a.button[href="#/pools/new"]`)))
	if stored := eval(`sessionStorage.getItem('beacon.console.token') ?? ''`); stored != gw.token {
		t.Fatalf("sessionStorage token = %q, want the bootstrap token", stored)
	}

	// A refused pool shows the API's code and field violation.
	do("submit a bad pool",
		chromedp.Click(chromedp.CSS(`a.button[href="#/pools/new"]`)),
		chromedp.WaitVisible(chromedp.ID("pool-id")),
		chromedp.SendKeys(chromedp.ID("pool-id"), "web"),
		chromedp.SendKeys(chromedp.ID("pool-ranges"), "192.0.2.1/24"),
		submit,
		chromedp.WaitVisible(chromedp.CSS("main .result .error")))
	if e := text("main .result .error"); !strings.Contains(e, "INVALID_ARGUMENT") || !strings.Contains(e, "pool.ranges[0]") || !strings.Contains(e, "did you mean 192.0.2.0/24") {
		t.Errorf("error shown for a bad range: %q", e)
	}
	if inv := eval(`document.getElementById('pool-ranges').getAttribute('aria-invalid') ?? ''`); inv != "true" {
		t.Errorf("the ranges field is not marked invalid (aria-invalid %q)", inv)
	}
	look("console-pool-error")

	// The corrected pool is created and listed with its utilization.
	do("create the pool",
		chromedp.SetValue(chromedp.ID("pool-ranges"), "192.0.2.0/24\n2001:db8::/120"),
		submit,
		chromedp.WaitVisible(chromedp.CSS(`#pools-table tr[data-pool="web"]`)))
	if row := text(`#pools-table tr[data-pool="web"]`); !strings.Contains(row, "192.0.2.0/24") || !strings.Contains(row, "0 / 256 used") {
		t.Errorf("pool row: %q", row)
	}
	if f := text("#flash"); !strings.Contains(f, "Pool web created") {
		t.Errorf("flash after create: %q", f)
	}

	// An allocation made by someone else appears without a reload.
	do("open allocations",
		chromedp.Click(chromedp.CSS(`#nav a[data-route="allocations"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="streaming"]`)))
	eval(`window.beaconE2E = 'same document'`)
	alloc := gw.allocate(t, "demo", `{"allocation":{"owner":"default/nginx","namespace":"default","ipFamilies":["IP_FAMILY_IPV4","IP_FAMILY_IPV6"],"ipFamilyPolicy":"IP_FAMILY_POLICY_REQUIRE_DUAL_STACK"}}`)
	row := fmt.Sprintf(`#alloc-table tr[data-name=%q]`, alloc.Name)
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(row)))
	wcancel()
	if err != nil {
		shot(t, ctx, "console-failure")
		t.Fatalf("the allocation %s did not appear within 10 s: %v", alloc.Name, err)
	}
	t.Logf("the allocation appeared in the table %v after the REST call", time.Since(start).Round(time.Millisecond))
	if marker := eval(`window.beaconE2E ?? 'reloaded'`); marker != "same document" {
		t.Errorf("the page was reloaded (marker %q)", marker)
	}
	got := text(row)
	for _, want := range append([]string{"default/nginx", "demo", "web"}, alloc.Addresses...) {
		if !strings.Contains(got, want) {
			t.Errorf("allocation row %q lacks %q", got, want)
		}
	}
	look("console-allocations")

	// The search form becomes the List filter.
	do("filter allocations",
		chromedp.SetValue(chromedp.ID("f-pool"), "web"),
		chromedp.SendKeys(chromedp.ID("f-owner"), "default/nginx"),
		submit,
		chromedp.WaitVisible(chromedp.CSS("code#filter-expr")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if f := text("#filter-expr"); f != `pool = "web" AND owner = "default/nginx"` {
		t.Errorf("filter shown = %q", f)
	}
	do("filter out everything",
		chromedp.SetValue(chromedp.ID("f-owner"), "nobody"),
		submit,
		chromedp.WaitVisible(chromedp.CSS("#alloc-results .empty")))

	// Pool utilization follows: web has one address of each family in
	// use, edge six of its eight.
	if code, out := gw.do(t, "POST", "/v1/pools?poolId=edge", `{"ranges":["198.51.100.0/29"],"autoAssign":false,"description":"edge routers"}`); code != http.StatusOK {
		t.Fatalf("create pool edge = %d %s", code, out)
	}
	for i := range 6 {
		gw.allocate(t, "demo", fmt.Sprintf(`{"allocation":{"owner":"edge/r%d","requestedPool":"pools/edge"}}`, i))
	}
	do("open pools",
		chromedp.Click(chromedp.CSS(`#nav a[data-route="pools"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pools-table tr[data-pool="web"]`)))
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = chromedp.Run(pctx, chromedp.Poll[bool](`document.querySelector('#pools-table tr[data-pool="web"]')?.textContent.includes('1 / 256 used')`, chromedp.WithPollingTimeout(10*time.Second)))
	pcancel()
	if err != nil {
		t.Errorf("the pool row never showed 1 / 256 used: %q", text(`#pools-table tr[data-pool="web"]`))
	}
	pctx, pcancel = context.WithTimeout(ctx, 10*time.Second)
	_, err = chromedp.Run(pctx, chromedp.Poll[bool](`document.querySelector('#pools-table tr[data-pool="edge"] meter')?.value === 7500`, chromedp.WithPollingTimeout(10*time.Second)))
	pcancel()
	if err != nil {
		t.Errorf("the edge pool's meter never showed 75%%: %q", text("#pools-table"))
	}
	look("console-pools")

	// The audit log shows who allocated what.
	do("open the audit log",
		chromedp.Click(chromedp.CSS(`#nav a[data-route="audit"]`)),
		chromedp.WaitVisible(chromedp.ID("audit-table")))
	if a := text("#audit-table tbody"); !strings.Contains(a, "ALLOCATE") || !strings.Contains(a, "default/nginx") || !strings.Contains(a, alloc.Addresses[0]) {
		t.Errorf("audit table: %q", a)
	}
	look("console-audit")

	// A value with quotes and backslashes is quoted for the filter.
	eval(`location.hash = '#/audit?actor=' + encodeURIComponent('a"b\\'); ''`)
	do("quoted audit filter", chromedp.WaitVisible(chromedp.CSS("main .empty")))
	if f := text("main .filter-expr code"); f != `actor = "a\"b\\"` {
		t.Errorf("quoted filter = %q", f)
	}
	// A filter the API refuses is shown readably.
	eval(`location.hash = '#/audit?action=NOPE'; ''`)
	do("bad action filter", chromedp.WaitVisible(chromedp.CSS("main .error")))
	if e := text("main .error"); !strings.Contains(e, "INVALID_ARGUMENT") || !strings.Contains(e, "action must be one of") {
		t.Errorf("error shown for a bad action filter: %q", e)
	}

	// An announcer's sessions and announcements (a fake one: a real
	// announcerd would announce on this machine's network).
	fakeAnnouncer(t, ipamd.grpc, "demo", "node-a", &ipamv1.AnnouncerStatus{
		Announced: []*ipamv1.AnnouncedAddress{
			{Address: alloc.Addresses[0], Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
			{Address: alloc.Addresses[1] + "/128", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tenants/demo/bgpPeers/tor-1"}},
		},
		Sessions: []*ipamv1.BGPSessionStatus{{
			Peer: "tenants/demo/bgpPeers/tor-1", State: ipamv1.BGPSessionStatus_STATE_ESTABLISHED,
			BfdUp: true, AdvertisedPrefixes: 1, Since: timestamppb.Now(),
		}},
	})
	do("open announcers",
		chromedp.Click(chromedp.CSS(`#nav a[data-route="announcers"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)))
	// The node registers with its hello and reports its status just after:
	// wait for the status to reach the page (re-opening it to refresh).
	card := text(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)
	_ = testwait.Poll(t.Context(), 30*time.Second, func() error { // what is missing is reported below
		if strings.Contains(card, "ESTABLISHED") {
			return nil
		}
		do("reopen announcers",
			chromedp.Click(chromedp.CSS(`#nav a[data-route="announcers"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)))
		card = text(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)
		return testwait.ErrNotYet
	})
	for _, want := range []string{"node-a", "live", "rack=r1", "eth0", "192.0.2.250/24", "tor-1", "ESTABLISHED", alloc.Addresses[0], "L2", alloc.Addresses[1] + "/128", "BGP"} {
		if !strings.Contains(card, want) {
			t.Errorf("announcer card lacks %q:\n%s", want, card)
		}
	}
	look("console-announcers")

	// The cluster's labels for the node (what the k8s adapter writes)
	// merge into the card, and the exclusion label shows.
	nconn, err := grpc.NewClient(ipamd.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer nconn.Close()
	if _, err := ipamv1.NewAnnouncementServiceClient(nconn).CreateNode(context.Background(), &ipamv1.CreateNodeRequest{
		Parent: "tenants/demo", NodeId: "node-a",
		Node: &ipamv1.Node{Labels: map[string]string{"zone": "a", "node.kubernetes.io/exclude-from-external-load-balancers": ""}},
	}); err != nil {
		t.Fatal(err)
	}
	_ = testwait.Poll(t.Context(), 30*time.Second, func() error { // what is missing is reported below
		if strings.Contains(card, "excluded") {
			return nil
		}
		do("reopen announcers",
			chromedp.Click(chromedp.CSS(`#nav a[data-route="announcers"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)))
		card = text(`section.announcer[data-name="tenants/demo/announcers/node-a"]`)
		return testwait.ErrNotYet
	})
	for _, want := range []string{"excluded", "rack=r1", "zone=a"} {
		if !strings.Contains(card, want) {
			t.Errorf("announcer card of an excluded node lacks %q:\n%s", want, card)
		}
	}

	// Global groups: one address for two tenants, listed with its members.
	if code, out := gw.do(t, "POST", "/v1/pools?poolId=anycast", `{"ranges":["198.51.100.64/29"]}`); code != http.StatusOK {
		t.Fatalf("create pool anycast = %d %s", code, out)
	}
	if code, out := gw.do(t, "POST", "/v1/pools/anycast/globalGroups?globalGroupId=web", `{"tenants":["tenants/east","tenants/west"],"description":"shop frontend"}`); code != http.StatusOK {
		t.Fatalf("create global group = %d %s", code, out)
	}
	gw.allocate(t, "east", `{"allocation":{"owner":"shop/web","globalGroup":"pools/anycast/globalGroups/web"}}`)
	gw.allocate(t, "west", `{"allocation":{"owner":"shop/web","globalGroup":"pools/anycast/globalGroups/web","globalRole":"GLOBAL_ROLE_BACKUP"}}`)
	do("open global groups",
		chromedp.Click(chromedp.CSS(`#nav a[data-route="groups"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#groups-table tr[data-group="web"]`)))
	grow := text(`#groups-table tr[data-group="web"]`)
	for _, want := range []string{"shop frontend", "anycast", "198.51.100.64", "east", "west", "shop/web", "(backup)", "(active)"} {
		if !strings.Contains(grow, want) {
			t.Errorf("global group row lacks %q:\n%s", want, grow)
		}
	}
	look("console-groups")

	// Sign-out forgets the token.
	do("sign out", chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("token")))
	if stored := eval(`sessionStorage.getItem('beacon.console.token') ?? ''`); stored != "" {
		t.Errorf("token still in sessionStorage after sign-out")
	}
	// A wrong token is refused with the API's word for it.
	do("sign in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token"), "bct_not-a-token-at-all"),
		submit,
		chromedp.WaitVisible(chromedp.CSS("main .result .error")))
	if e := text("main .result .error"); !strings.Contains(e, "UNAUTHENTICATED") {
		t.Errorf("error shown for a wrong token: %q", e)
	}

	// A tenant token needs its tenant, then sees that tenant's allocations.
	code, out := gw.do(t, "POST", "/v1/tokens?tokenId=console-demo", `{"role":"ROLE_TENANT","tenant":"tenants/demo"}`)
	var tok struct{ Secret string }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &tok) != nil || tok.Secret == "" {
		t.Fatalf("create a tenant token = %d %s", code, out)
	}
	do("sign in with a tenant token for every tenant",
		chromedp.SetValue(chromedp.ID("token"), tok.Secret),
		submit,
		chromedp.WaitVisible(chromedp.CSS("main .result .hint-line")))
	if e := text("main .result"); !strings.Contains(e, "PERMISSION_DENIED") || !strings.Contains(e, "fill in Tenant") {
		t.Errorf("error shown for a tenant token without its tenant: %q", e)
	}
	do("sign in to the tenant",
		chromedp.SendKeys(chromedp.ID("tenant"), "demo"),
		submit,
		chromedp.WaitVisible(chromedp.CSS(`a.button[href="#/pools/new"]`)),
		chromedp.Click(chromedp.CSS(`#nav a[data-route="allocations"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="streaming"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if who := text("#who-scope"); who != "Signed in · tenant demo" {
		t.Errorf("scope shown = %q", who)
	}
	if n := text("#alloc-count"); n != "7 of 7 allocations" {
		t.Errorf("the tenant sees %q, want its 7 allocations", n)
	}
	if p := text("main .filter-expr"); !strings.Contains(p, "tenants/demo") {
		t.Errorf("parent shown = %q", p)
	}
	if r := text(row); !strings.Contains(r, "node-a") {
		t.Errorf("the allocation row does not say node-a announces it: %q", r)
	}
	look("console-tenant-allocations")

	// Without the watch stream the page polls, and still shows new
	// allocations within a few seconds.
	do("block the watch stream", blockURLs(`*://*:*/v1/*/allocations\:watch`))
	eval(`location.hash = '#/allocations?owner=late'; ''`)
	do("fall back to polling", chromedp.WaitVisible(chromedp.CSS(`#live[data-state="polling"]`)))
	late := gw.allocate(t, "demo", `{"allocation":{"owner":"late"}}`)
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	err = chromedp.Do(lctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#alloc-table tr[data-name=%q]`, late.Name))))
	lcancel()
	if err != nil {
		shot(t, ctx, "console-failure")
		t.Fatalf("while polling, the allocation %s did not appear within 10 s: %v", late.Name, err)
	}
	do("unblock the watch stream", blockURLs())

	for _, p := range problems() {
		t.Errorf("browser: %s", p)
	}
}

// newBrowser starts headless Chromium with a fresh profile and no
// background traffic. problems returns the script exceptions, console
// errors and browser-log errors (such as CSP violations) seen so far.
func newBrowser(t *testing.T, chromium string) (ctx context.Context, problems func() []string) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", chromium, err)
	}

	var mu sync.Mutex
	var seen []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || (m.Type == chromedp.ConsoleError && !expectedError(m.Text)) {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// expectedError tells the failed requests the scenario provokes on
// purpose (the refused pool and filter, the wrong token, the tenant token
// without its tenant) from real problems.
func expectedError(text string) bool {
	for _, code := range []string{"400", "401", "403"} {
		if strings.Contains(text, "status of "+code) {
			return true
		}
	}
	return strings.Contains(text, "ERR_BLOCKED_BY_CLIENT") // the blocked watch stream
}

// blockURLs makes the browser refuse requests matching the URL patterns
// (URLPattern syntax); none unblocks everything.
func blockURLs(patterns ...string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		p := network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{}}
		for _, u := range patterns {
			p.URLPatterns = append(p.URLPatterns, &network.BlockPattern{URLPattern: u, Block: true})
		}
		_, err := cdp.Call(ctx, tg, network.SetBlockedURLs, p)
		return err
	})
}

// shot saves a full-page screenshot as name.png into the artifacts folder.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := artifactsDir(t)
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Errorf("save screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", p)
}

// artifactsDir is $BEACON_ARTIFACTS, or artifacts/ at the repo root
// (git-ignored).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BEACON_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// repoRoot is the repository's top folder (tests run in tests/integration).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// skipLoudly skips the test with a message that shows even without -v.
func skipLoudly(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "\n*** SKIP %s: %s ***\n\n", t.Name(), msg)
	t.Skip(msg)
}

// chromiumPath returns Debian's Chromium ($BEACON_CHROMIUM or
// /usr/bin/chromium), installing the package when it is missing and the
// test runs as root; otherwise the test is skipped.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BEACON_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		skipLoudly(t, "%s is missing and the test is not root: run 'make deps' as root (installs Debian's chromium)", p)
	}
	t.Logf("%s is missing: installing Debian's chromium", p)
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "chromium"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("apt-get installed chromium, but %s: %v", p, err)
	}
	return p
}

// gatewayd is a running gatewayd and what it takes to call it.
type gatewayd struct {
	url    string // https://127.0.0.1:port
	token  string // the bootstrap admin token
	client *http.Client
}

// gatewaydBinary returns $BEACON_BIN/gatewayd if it exists, else builds
// it; the test is skipped if this tree has no gatewayd.
func gatewaydBinary(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("BEACON_BIN"); d != "" {
		if p := filepath.Join(d, "gatewayd"); fileExists(p) {
			return p
		}
	}
	if !fileExists(filepath.Join(repoRoot(t), "services", "gateway", "cmd", "gatewayd")) {
		skipLoudly(t, "this tree has no gatewayd (services/gateway/cmd/gatewayd, branch gw) and $BEACON_BIN has none")
	}
	p := filepath.Join(t.TempDir(), "gatewayd")
	out, err := exec.Command("go", "build", "-o", p, "github.com/beaconlb/beacon/services/gateway/cmd/gatewayd").CombinedOutput()
	if err != nil {
		t.Fatalf("build gatewayd: %v\n%s", err, out)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startGatewayd runs gatewayd (bin) in front of the IPAM at ipam, with TLS from
// fresh development certificates and a bootstrap admin token, on loopback
// ports it picks itself, and waits until it serves.
func startGatewayd(t *testing.T, bin, ipam string) *gatewayd {
	t.Helper()
	dir := t.TempDir()
	certs, tokenFile := filepath.Join(dir, "certs"), filepath.Join(dir, "bootstrap-token")
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0",
		"--ipam", ipam, "--dev-certs", certs, "--bootstrap-token-file", tokenFile, "--log-level", "debug")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	listen := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var rec struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "gatewayd serving" {
				listen <- rec.Listen
			}
		}
		exited <- cmd.Wait()
	}()
	logText := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		werr := <-exited
		if t.Failed() {
			t.Logf("gatewayd (%v) logs:\n%s", werr, logText())
		}
	})
	var addr string
	select {
	case addr = <-listen:
	case err := <-exited:
		exited <- err
		t.Fatalf("gatewayd exited before serving: %v\n%s", err, logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("gatewayd not serving after 60s\n%s", logText())
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the development CA file")
	}
	return &gatewayd{
		url:   "https://" + addr,
		token: strings.TrimSpace(string(token)),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		}},
	}
}

// do makes one call with the bootstrap token and returns the status and
// body.
func (g *gatewayd) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// requireConsole skips the test unless gatewayd serves the console at /.
func (g *gatewayd) requireConsole(t *testing.T) {
	t.Helper()
	code, body := g.do(t, "GET", "/", "")
	if code != http.StatusOK || !strings.Contains(body, `content="beacon-console"`) {
		skipLoudly(t, "gatewayd serves no console at / (GET / = %d %.80q): services/gateway/cmd/gatewayd/run.go must set gateway.Config.Console to console.Handler() (package services/gateway/internal/console)", code, body)
	}
}

// allocation is what the test reads of an Allocate answer.
type allocation struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
}

// allocate makes an allocation through the REST API, as curl would.
func (g *gatewayd) allocate(t *testing.T, tenant, body string) allocation {
	t.Helper()
	code, out := g.do(t, "POST", "/v1/tenants/"+tenant+"/allocations:allocate", body)
	var resp struct{ Allocation allocation }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &resp) != nil || len(resp.Allocation.Addresses) == 0 {
		t.Fatalf("allocate = %d %s", code, out)
	}
	return resp.Allocation
}

// fakeAnnouncer subscribes a node to the IPAM at addr as announcerd would
// (hello, a status report, heartbeats), without announcing anything on
// the network, until the test ends.
func fakeAnnouncer(t *testing.T, addr, tenant, node string, status *ipamv1.AnnouncerStatus) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *ipamv1.SubscribeRequest) {
		if err := stream.Send(r); err != nil && ctx.Err() == nil {
			t.Errorf("announcer %s: send: %v", node, err)
		}
	}
	send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
		Parent: "tenants/" + tenant, Node: node, Labels: map[string]string{"rack": "r1"},
		Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true, HardwareAddress: "02:00:00:00:00:01", Addresses: []string{"192.0.2.250/24"}}},
	}}})
	send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Status{Status: status}})
	done := make(chan struct{})
	go func() { // the plan: read and drop
		defer close(done)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	go func() {
		// The IPAM ends a session after three missed 200 ms heartbeats.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}})
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close()
	})
}
