package ui_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/ui/uitest"
)

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
	c := uitest.Start(t)
	b := newBrowserRegion(t)

	t.Run("each role signs in and sees its own name", func(t *testing.T) {
		for _, role := range []string{api.RoleAdmin, api.RoleOperator, api.RoleReadonly} {
			ctx := c.Tab()
			uitest.SignIn(t, ctx, b.base, b.tokens[role])
			if who := uitest.Text(t, ctx, ".who"); !strings.Contains(who, "("+role+")") {
				t.Errorf("signed in as %s, the page says %q", role, who)
			}
			if users := uitest.Count(t, ctx, `nav a[href="/users"]`); users != map[bool]int{true: 1, false: 0}[role == api.RoleAdmin] {
				t.Errorf("signed in as %s: %d links to the users page", role, users)
			}
			uitest.Do(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`form[action="/sign-out"] button`)), chromedp.WaitVisible(chromedp.ID("token")))
		}
	})

	t.Run("machines are listed and filtered", func(t *testing.T) {
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleOperator])
		if n := uitest.Count(t, ctx, "#machines tbody a"); n != 14 {
			t.Errorf("machines listed: %d, want 14", n)
		}
		uitest.Screenshot(t, ctx, "machines")
		uitest.Do(t, ctx, "filter", chromedp.SendKeys(chromedp.ID("q"), "Pool=gold"), chromedp.Submit(chromedp.ID("q")),
			chromedp.WaitVisible(chromedp.CSS(`#q[value="Pool=gold"]`)))
		if n := uitest.Count(t, ctx, "#machines tbody a"); n != 4 {
			t.Errorf("machines in pool gold: %d, want 4", n)
		}
	})

	t.Run("a machine shows its inventory and its log live", func(t *testing.T) {
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleReadonly])
		b.logLine(t, "booted before the page opened")
		uitest.Do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid), chromedp.WaitVisible(chromedp.ID("inventory")))
		if inv := uitest.Text(t, ctx, "#inventory"); !strings.Contains(inv, "Acme Servers") || !strings.Contains(inv, "65536") {
			t.Errorf("inventory shown: %q", inv)
		}
		if log := uitest.Text(t, ctx, "#log"); !strings.Contains(log, "booted before the page opened") {
			t.Errorf("log tail: %q", log)
		}
		// The line arrives through the page's event stream, without a reload.
		uitest.Do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		b.logLine(t, "a new <b>line</b> of the log")
		uitest.Do(t, ctx, "wait for the live line", chromedp.Poll[chromedp.Void](`document.querySelector('#log').innerText.includes('a new <b>line</b>')`,
			chromedp.WithPollingTimeout(30*time.Second)))
		if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !kept {
			t.Errorf("the page reloaded to show the line (%v)", err)
		}
		if n := uitest.Count(t, ctx, "#log b"); n != 0 {
			t.Errorf("the log line's markup became %d elements", n)
		}
		uitest.Screenshot(t, ctx, "machine")
	})

	t.Run("pod storage bars match the API", func(t *testing.T) {
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleReadonly])
		uitest.Do(t, ctx, "open pods", chromedp.Navigate(b.base+"/pods"), chromedp.WaitVisible(chromedp.CSS("progress.pool-bar")))
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
		uitest.Screenshot(t, ctx, "pods")
	})

	t.Run("readonly has no action buttons and a forged post is refused", func(t *testing.T) {
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleReadonly])
		uitest.Do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid), chromedp.WaitVisible(chromedp.ID("inventory")))
		if n := uitest.Count(t, ctx, "button.action"); n != 0 {
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
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleOperator])
		uitest.Do(t, ctx, "lock the machine", chromedp.Navigate(b.base+"/machines/"+b.web.Uuid),
			chromedp.Click(chromedp.CSS(`form[action$="/lock"] button.action`)),
			chromedp.WaitVisible(chromedp.CSS(`form[action$="/unlock"] button.action`)))
		if locked := uitest.Text(t, ctx, "#machine-locked"); locked != "yes" {
			t.Errorf("after the lock the page says locked %q", locked)
		}
	})

	t.Run("a machine named with markup renders as text", func(t *testing.T) {
		ctx := c.Tab()
		uitest.SignIn(t, ctx, b.base, b.tokens[api.RoleAdmin])
		uitest.Do(t, ctx, "open the machine", chromedp.Navigate(b.base+"/machines/"+b.evil.Uuid), chromedp.WaitVisible(chromedp.ID("machine-name")))
		if name := uitest.Text(t, ctx, "#machine-name"); name != evilName {
			t.Errorf("the name shows as %q", name)
		}
		uitest.Do(t, ctx, "list", chromedp.Navigate(b.base+"/machines"), chromedp.WaitVisible(chromedp.ID("machines")),
			chromedp.Navigate(b.base+"/events"), chromedp.WaitVisible(chromedp.ID("events")))
		if n := uitest.Count(t, ctx, "main img, main script"); n != 0 {
			t.Errorf("%d elements came from a field", n)
		}
		if n := c.Dialogs(); n != 0 {
			t.Errorf("%d JavaScript dialogs opened", n)
		}
		uitest.Screenshot(t, ctx, "events")
		uitest.Do(t, ctx, "racks", chromedp.Navigate(b.base+"/racks"), chromedp.WaitVisible(chromedp.ID("racks")))
		uitest.Screenshot(t, ctx, "racks")
	})
}
