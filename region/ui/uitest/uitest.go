// Package uitest drives the region's web UI in Debian's chromium (apt-get install chromium;
// .ci/run installs it) through the DevTools protocol, for the UI's browser tests and the
// integration tests; a test without chromium is skipped, saying so.
package uitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

const browserTimeout = 3 * time.Minute

// Chrome is one headless chromium for a test; each user gets a browser context of its own
// (its own cookies), as separate browsers would.
type Chrome struct {
	t       *testing.T
	browser context.Context
	dialogs atomic.Int32
}

// Start starts chromium for t, or skips t without it.
func Start(t *testing.T) *Chrome {
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
	return &Chrome{t: t, browser: browser}
}

// Tab opens a tab in a new browser context that accepts (and counts) every dialog.
func (c *Chrome) Tab() context.Context {
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

// Do runs actions, failing the test with what and the text of the page it stopped on.
func Do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, pageText(ctx))
	}
}

// pageText is where the tab is and the start of its text, for a failure's message.
func pageText(ctx context.Context) string {
	// ctx may be the one that timed out: the tab stays open until the test ends.
	tab, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	at, _ := chromedp.Run(tab, chromedp.Location())
	text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return "the page cannot be read: " + err.Error()
	}
	return "page " + at + ":\n" + text[:min(len(text), 2000)]
}

// Submit clicks the button sel matches and waits for the page its form leads to, so that
// what runs next never meets the page being replaced.
func Submit(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, pageText(ctx))
	}
}

// SignIn signs in through the sign-in page's form, as a person would.
func SignIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	Do(t, ctx, "sign in",
		chromedp.Navigate(base+"/machines"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("machines")))
}

// Text is the text of the first element sel matches.
func Text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// Count is how many elements sel matches.
func Count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// Screenshot saves the viewport as name.png when IRONFLOW_UI_SCREENSHOTS names a directory.
func Screenshot(t *testing.T, ctx context.Context, name string) {
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

// Dialogs is how many JavaScript dialogs the pages of c opened.
func (c *Chrome) Dialogs() int { return int(c.dialogs.Load()) }
