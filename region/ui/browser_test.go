package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// The browser tests drive Debian's chromium (apt-get install chromium; .ci/run installs it)
// through the DevTools protocol. IRONFLOW_UI_SCREENSHOTS names a directory to save PNGs of
// the main pages in (docs/ui is where the docs take them from).

const browserTimeout = 90 * time.Second

// chrome is one headless chromium for a test; each user gets a browser context of its own
// (its own cookies), as separate browsers would.
type chrome struct {
	t       *testing.T
	browser context.Context
	dialogs atomic.Int32 // JavaScript dialogs any page opened
}

func startChrome(t *testing.T) *chrome {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install --no-install-recommends chromium; .ci/run installs it): the UI's browser tests do not run")
	}
	profile, err := os.MkdirTemp("", "ironflow-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1200, 900), chromedp.UserDataDir(profile))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(func() {
		cancel()
		// Chromium's helpers may still write there for a moment after it exits; the
		// directory is under the system's temporary directory either way.
		_ = os.RemoveAll(profile)
	})
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts chromium
		t.Fatalf("start chromium: %v", err)
	}
	return &chrome{t: t, browser: browser}
}

// tab opens a tab in a new browser context that accepts (and counts) every dialog.
func (c *chrome) tab() context.Context {
	c.t.Helper()
	ctx, cancel := chromedp.NewContext(c.browser, chromedp.WithNewBrowserContext())
	c.t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, browserTimeout)
	c.t.Cleanup(cancelTimeout)
	dialogs := chromedp.Events(ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			c.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// do runs actions, failing the test with what.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// signInWithForm signs in through the sign-in page's form, as a person would.
func signInWithForm(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	do(t, ctx, "sign in",
		chromedp.Navigate(base+"/machines"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("machines")))
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// screenshot saves the viewport as name.png when IRONFLOW_UI_SCREENSHOTS is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("IRONFLOW_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// browserRegion is a region with a rack, machines, a pod and its pools, for the browser.
type browserRegion struct {
	*uiEnv
	rack  api.RackRegistered
	racks *client.Client // the rack's own client (syslog, pod facts)
	web   api.Machine
	evil  api.Machine
	pod   api.Pod
}

const evilName = `<img src=x onerror=alert(1)>`

func newBrowserRegion(t *testing.T) *browserRegion {
	t.Helper()
	e := newUIEnv(t)
	ctx := context.Background()
	reg, err := client.New(e.base, rackSecret).RegisterRack(ctx, api.RackRegistration{Name: "rack-1", Interfaces: []string{"eth0"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserRegion{uiEnv: e, rack: reg, racks: client.New(e.base, reg.Token)}
	// The rack serves 10.0.0.0/24, so it may post the syslog of machines there.
	fabric, err := e.admin.Fabrics().Create(ctx, api.Fabric{Name: "fabric-1"})
	if err != nil {
		t.Fatal(err)
	}
	vlan, err := e.admin.VLANs().Create(ctx, api.VLAN{Fabric: fabric.Uuid, VID: 1, DHCPOn: true, PrimaryRack: reg.Rack.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Subnets().Create(ctx, api.Subnet{Name: "net-1", CIDR: "10.0.0.0/24", VLAN: vlan.Uuid,
		DynamicRange: api.IPRange{Start: "10.0.0.100", End: "10.0.0.200"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Pools().Create(ctx, api.Pool{Name: "gold"}); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		pool := ""
		if i%3 == 0 {
			pool = "gold"
		}
		if _, err := e.admin.Machines().Create(ctx, api.Machine{Name: fmt.Sprintf("node-%02d", i), Pool: pool}); err != nil {
			t.Fatal(err)
		}
	}
	b.web, err = e.admin.Machines().Create(ctx, api.Machine{Name: "web-01", Rack: reg.Rack.Uuid, HardwareAddrs: []string{"52:54:00:12:34:56"},
		Enlisted: &api.Enlisted{Inventory: &api.Inventory{Hostname: "web-01", Arch: "amd64", MemoryMiB: 65536,
			SMBIOS: api.SMBIOS{Manufacturer: "Acme Servers"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.evil, err = e.admin.Machines().Create(ctx, api.Machine{Name: evilName, Description: `"><script>alert(2)</script>`}); err != nil {
		t.Fatal(err)
	}
	if b.pod, err = e.admin.Pods().Create(ctx, api.Pod{Name: "kvm-1", Type: "virsh", PowerAddress: "qemu:///system", Rack: reg.Rack.Uuid}); err != nil {
		t.Fatal(err)
	}
	if b.pod, err = b.racks.StorePodFacts(ctx, reg.Rack.Uuid, b.pod.Uuid, api.PodFacts{Arch: "x86_64", Cores: 32, MemoryMiB: 131072, StorageGiB: 1500,
		StoragePools: []api.PodStoragePool{
			{Name: "default", Type: "dir", Path: "/var/lib/libvirt/images", Active: true, CapacityBytes: 1000 << 30, AllocationBytes: 250 << 30, AvailableBytes: 750 << 30},
			{Name: "fast", Type: "logical", Path: "/dev/fast", Active: true, CapacityBytes: 500 << 30, AllocationBytes: 450 << 30, AvailableBytes: 50 << 30},
		}}); err != nil {
		t.Fatal(err)
	}
	return b
}

// logLine has the rack post a syslog line of the web machine.
func (b *browserRegion) logLine(t *testing.T, line string) {
	t.Helper()
	res, err := b.racks.PostSyslog(context.Background(), b.rack.Rack.Uuid, []api.SyslogMessage{{MAC: b.web.HardwareAddrs[0], Addr: "10.0.0.5",
		Received: time.Now().UTC(), Facility: 1, Severity: 6, Hostname: "web-01", App: "kernel", Text: line}})
	if err != nil || len(res.Rejected) > 0 {
		t.Fatalf("post syslog: %+v, %v", res, err)
	}
}

func TestBrowser(t *testing.T) {
	c := startChrome(t)
	b := newBrowserRegion(t)

	t.Run("each role signs in and sees its own name", func(t *testing.T) {
		for _, role := range []string{api.RoleAdmin, api.RoleOperator, api.RoleReadonly} {
			ctx := c.tab()
			signInWithForm(t, ctx, b.base, b.tokens[role])
			if who := text(t, ctx, ".who"); !strings.Contains(who, "("+role+")") {
				t.Errorf("signed in as %s, the page says %q", role, who)
			}
			if users := count(t, ctx, `nav a[href="/users"]`); users != map[bool]int{true: 1, false: 0}[role == api.RoleAdmin] {
				t.Errorf("signed in as %s: %d links to the users page", role, users)
			}
			do(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`form[action="/sign-out"] button`)), chromedp.WaitVisible(chromedp.ID("token")))
		}
	})

	t.Run("machines are listed and filtered", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleOperator])
		if n := count(t, ctx, "#machines tbody a"); n != 14 {
			t.Errorf("machines listed: %d, want 14", n)
		}
		screenshot(t, ctx, "machines")
		do(t, ctx, "filter", chromedp.SendKeys(chromedp.ID("q"), "Pool=gold"), chromedp.Submit(chromedp.ID("q")),
			chromedp.WaitVisible(chromedp.CSS(`#q[value="Pool=gold"]`)))
		if n := count(t, ctx, "#machines tbody a"); n != 4 {
			t.Errorf("machines in pool gold: %d, want 4", n)
		}
	})

	t.Run("a machine shows its inventory and its log live", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleReadonly])
		b.logLine(t, "booted before the page opened")
		do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid), chromedp.WaitVisible(chromedp.ID("inventory")))
		if inv := text(t, ctx, "#inventory"); !strings.Contains(inv, "Acme Servers") || !strings.Contains(inv, "65536") {
			t.Errorf("inventory shown: %q", inv)
		}
		if log := text(t, ctx, "#log"); !strings.Contains(log, "booted before the page opened") {
			t.Errorf("log tail: %q", log)
		}
		// The line arrives through the page's event stream, without a reload.
		do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		b.logLine(t, "a new <b>line</b> of the log")
		do(t, ctx, "wait for the live line", chromedp.Poll[chromedp.Void](`document.querySelector('#log').innerText.includes('a new <b>line</b>')`,
			chromedp.WithPollingTimeout(30*time.Second)))
		if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !kept {
			t.Errorf("the page reloaded to show the line (%v)", err)
		}
		if n := count(t, ctx, "#log b"); n != 0 {
			t.Errorf("the log line's markup became %d elements", n)
		}
		screenshot(t, ctx, "machine")
	})

	t.Run("pod storage bars match the API", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleReadonly])
		do(t, ctx, "open pods", chromedp.Navigate(b.base+"/pods"), chromedp.WaitVisible(chromedp.CSS("progress.pool-bar")))
		pod, err := b.admin.Pods().Get(context.Background(), b.pod.Uuid)
		if err != nil {
			t.Fatal(err)
		}
		for _, pool := range pod.StoragePools {
			bar := fmt.Sprintf(`tr[data-pool=%q] progress`, pool.Name)
			attrs, err := chromedp.Run(ctx, chromedp.Attributes(chromedp.CSS(bar)))
			if err != nil {
				t.Fatalf("bar of %s: %v", pool.Name, err)
			}
			if attrs["value"] != strconv.FormatUint(pool.AllocationBytes, 10) || attrs["max"] != strconv.FormatUint(pool.CapacityBytes, 10) {
				t.Errorf("bar of pool %s: value %s max %s; the API says %d of %d", pool.Name, attrs["value"], attrs["max"], pool.AllocationBytes, pool.CapacityBytes)
			}
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(`document.querySelector(%q).position`, bar)))
			if want := float64(pool.AllocationBytes) / float64(pool.CapacityBytes); err != nil || shown < want-1e-6 || shown > want+1e-6 {
				t.Errorf("bar of pool %s is filled to %v, want %v (%v)", pool.Name, shown, want, err)
			}
		}
		screenshot(t, ctx, "pods")
	})

	t.Run("readonly has no action buttons and a forged post is refused", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleReadonly])
		do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid), chromedp.WaitVisible(chromedp.ID("inventory")))
		if n := count(t, ctx, "button.action"); n != 0 {
			t.Errorf("readonly sees %d action buttons", n)
		}
		// The page's own CSRF token makes the post as genuine as a form can be: the API refuses it.
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch('/machines/%s/lock', {method: 'POST',
			body: new URLSearchParams({csrf: document.querySelector('input[name=csrf]').value})}).then(r => r.status)`, b.web.Uuid),
			chromedp.EvalAwaitPromise))
		if err != nil || status != 403 {
			t.Errorf("forged lock as readonly: %d (%v), want 403", status, err)
		}
		if m, _ := b.admin.Machines().Get(context.Background(), b.web.Uuid); m.Locked {
			t.Error("the forged post locked the machine")
		}
	})

	t.Run("an operator's button acts", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleOperator])
		do(t, ctx, "lock the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid),
			chromedp.Click(chromedp.CSS(`form[action$="/lock"] button.action`)),
			chromedp.WaitVisible(chromedp.CSS(`form[action$="/unlock"] button.action`)))
		if locked := text(t, ctx, "#machine-locked"); locked != "yes" {
			t.Errorf("after the lock the page says locked %q", locked)
		}
	})

	t.Run("a machine named with markup renders as text", func(t *testing.T) {
		ctx := c.tab()
		signInWithForm(t, ctx, b.base, b.tokens[api.RoleAdmin])
		do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.evil.Uuid), chromedp.WaitVisible(chromedp.ID("machine-name")))
		if name := text(t, ctx, "#machine-name"); name != evilName {
			t.Errorf("the name shows as %q", name)
		}
		do(t, ctx, "list", chromedp.Navigate(b.base+"/machines"), chromedp.WaitVisible(chromedp.ID("machines")),
			chromedp.Navigate(b.base+"/events"), chromedp.WaitVisible(chromedp.ID("events")))
		if n := count(t, ctx, "main img, main script"); n != 0 {
			t.Errorf("%d elements came from a field", n)
		}
		if n := c.dialogs.Load(); n != 0 {
			t.Errorf("%d JavaScript dialogs opened", n)
		}
		screenshot(t, ctx, "events")
		do(t, ctx, "racks", chromedp.Navigate(b.base+"/racks"), chromedp.WaitVisible(chromedp.ID("racks")))
		screenshot(t, ctx, "racks")
	})
}
