package rack

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// aptRepo is a Debian-shaped repository (dists/stable/main/binary-amd64, pool/main) of a few
// small .debs built by the test, served by a plain HTTP server in a namespace of its own,
// reached from the test's namespace (where the rack's outgoing connections start) over a
// veth pair. It counts the requests of each path and the conditional ones.
type aptRepo struct {
	addr        netip.Addr
	root        string // served at /
	mu          sync.Mutex
	requests    map[string]int
	conditional map[string]int
}

func newAptRepo(t *testing.T) *aptRepo {
	t.Helper()
	for _, tool := range []string{"apt-get", "dpkg-deb", "dpkg-scanpackages"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (dpkg-dev, apt)", tool)
		}
	}
	ns := netnstest.Namespace(t, "pr")
	hostIf, repoIf := fmt.Sprintf("ifprh%d", os.Getpid()), fmt.Sprintf("ifprr%d", os.Getpid())
	netnstest.IP(t, "link", "add", hostIf, "type", "veth", "peer", "name", repoIf, "netns", ns)
	// Deleted before the namespace, and at once: the kernel removes the test's end of a pair
	// whose namespace went away only later, and a next run would find it still there.
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", hostIf).CombinedOutput(); err != nil {
			t.Errorf("ip link del %s: %v: %s", hostIf, err, out)
		}
	})
	third := os.Getpid() % 250
	hostAddr := fmt.Sprintf("10.231.%d.1/30", third)
	r := &aptRepo{addr: netip.MustParseAddr(fmt.Sprintf("10.231.%d.2", third)), requests: map[string]int{}, conditional: map[string]int{}}
	netnstest.IP(t, "addr", "add", hostAddr, "dev", hostIf)
	netnstest.IP(t, "link", "set", hostIf, "up")
	netnstest.IP(t, "-n", ns, "addr", "add", r.addr.String()+"/30", "dev", repoIf)
	netnstest.IP(t, "-n", ns, "link", "set", repoIf, "up")

	root := t.TempDir()
	r.root = root
	for _, p := range []struct{ name, payload string }{{"ironflow-hello", strings.Repeat("hello ", 40000)}, {"ironflow-tools", "tools"}, {"ironflow-docs", "docs"}} {
		buildDeb(t, root, p.name, p.payload)
	}
	bin := filepath.Join(root, "debian/dists/stable/main/binary-amd64")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	scan := exec.Command("dpkg-scanpackages", "--arch", "amd64", "pool")
	scan.Dir = filepath.Join(root, "debian")
	packages, err := scan.Output()
	if err != nil {
		t.Fatalf("dpkg-scanpackages: %v", err)
	}
	writeFile(t, filepath.Join(bin, "Packages"), string(packages))
	release := "Origin: ironflow-test\nSuite: stable\nCodename: stable\nComponents: main\nArchitectures: amd64\n" +
		"Date: " + time.Now().UTC().Format(time.RFC1123) + "\nSHA256:\n" +
		fmt.Sprintf(" %x %d main/binary-amd64/Packages\n", sha256.Sum256(packages), len(packages))
	writeFile(t, filepath.Join(root, "debian/dists/stable/Release"), release)

	files := http.FileServer(http.Dir(root))
	var ln net.Listener
	netnstest.Run(t, ns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(r.addr.String(), "80"))
		return err
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		if req.Header.Get("If-Modified-Since") != "" || req.Header.Get("If-None-Match") != "" {
			r.conditional[req.URL.Path]++
		}
		r.mu.Unlock()
		files.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func buildDeb(t *testing.T, root, name, payload string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	writeFile(t, filepath.Join(src, "DEBIAN/control"), fmt.Sprintf("Package: %s\nVersion: 1.0\nArchitecture: amd64\nMaintainer: Ironflow <test@example.org>\nDescription: %s for the proxy test\n", name, name))
	writeFile(t, filepath.Join(src, "usr/share/"+name+"/payload"), payload)
	pool := filepath.Join(root, "debian/pool/main/i", name)
	if err := os.MkdirAll(pool, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", src, filepath.Join(pool, name+"_1.0_amd64.deb")).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *aptRepo) counts(path string) (all, conditional int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path], r.conditional[path]
}

// aptClient runs the real apt-get in the client namespace with its own state, configured
// only by the test (the host's apt.conf.d is not read) to use proxy.
type aptClient struct {
	ns, conf, dir string
}

func newAptClient(t *testing.T, ns string, repo *aptRepo, proxyAddr string) *aptClient {
	t.Helper()
	d := t.TempDir()
	for _, sub := range []string{"empty", "state/lists/partial", "cache/archives/partial", "log"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(d, "status"), "")
	writeFile(t, filepath.Join(d, "sources.list"), fmt.Sprintf("deb [trusted=yes arch=amd64] http://%s/debian stable main\n", repo.addr))
	conf := filepath.Join(d, "apt.conf")
	writeFile(t, conf, strings.NewReplacer("@DIR@", d, "@PROXY@", proxyAddr).Replace(`Dir::Etc::Parts "@DIR@/empty";
Dir::Etc::Main "@DIR@/empty/none";
Dir::Etc::SourceList "@DIR@/sources.list";
Dir::Etc::SourceParts "@DIR@/empty";
Dir::Etc::PreferencesParts "@DIR@/empty";
Dir::State "@DIR@/state";
Dir::State::status "@DIR@/status";
Dir::Cache "@DIR@/cache";
Dir::Log "@DIR@/log";
Acquire::http::Proxy "http://@PROXY@";
Acquire::Languages "none";
Acquire::Retries "0";
Acquire::http::Timeout "20";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Sandbox::User "root";
Debug::NoLocking "true";
`))
	return &aptClient{ns: ns, conf: conf, dir: d}
}

// run runs apt-get with args in dir and returns its output.
func (a *aptClient) run(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", a.ns, "apt-get", "-q"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "APT_CONFIG="+a.conf, "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAptThroughTheRackProxy: a machine on a served subnet runs the real apt-get update and
// apt-get download through the rack's proxy against a Debian-shaped repository in another
// namespace. The second download is a hit (the repository sees the .deb once), the second
// update revalidates the index (a conditional request, no new Packages). An address of no
// served subnet is refused, and CONNECT to port 22 is refused to a machine too.
func TestAptThroughTheRackProxy(t *testing.T) {
	repo := newAptRepo(t)
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{})
	client, outsider := netip.MustParseAddr("10.77.0.50"), netip.MustParseAddr("10.99.0.9")
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", client.String()+"/24", "dev", v.cliIf)
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", outsider.String()+"/24", "dev", v.cliIf)
	netnstest.IP(t, "-n", v.rackNS, "route", "add", outsider.String()+"/32", "dev", v.rackIf)
	v.start(t)
	proxyAddr := net.JoinHostPort(v.serverIP.String(), "8000")

	ask := func(from netip.Addr, raw string) (status int) {
		netnstest.Run(t, v.cliNS, func() error {
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
			c, err := d.Dial("tcp", proxyAddr)
			if err != nil {
				return nil // not listening yet: status 0
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, raw); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			resp.Body.Close()
			status = resp.StatusCode
			return nil
		})
		return status
	}
	probe := fmt.Sprintf("GET http://%s/ready HTTP/1.1\r\nHost: %[1]s\r\nConnection: close\r\n\r\n", repo.addr)
	testutil.Eventually(t, 10*time.Second, "the proxy serving the subnet (its config applied)", func() bool {
		return ask(client, probe) == http.StatusNotFound // from the repository
	})

	apt := newAptClient(t, v.cliNS, repo, proxyAddr)
	const deb = "/debian/pool/main/i/ironflow-hello/ironflow-hello_1.0_amd64.deb"
	for i := range 2 {
		if out, err := apt.run(t, apt.dir, "update"); err != nil || strings.Contains(out, "Err:") {
			t.Fatalf("apt-get update %d: %v\n%s", i, err, out)
		}
		dir := t.TempDir()
		if out, err := apt.run(t, dir, "download", "ironflow-hello"); err != nil {
			t.Fatalf("apt-get download %d: %v\n%s", i, err, out)
		}
		got, err := os.ReadFile(filepath.Join(dir, "ironflow-hello_1.0_amd64.deb"))
		if err != nil {
			t.Fatalf("download %d: %v", i, err)
		}
		if want, _ := os.ReadFile(filepath.Join(repo.root, deb)); string(got) != string(want) {
			t.Fatalf("download %d: %d bytes, not the repository's %d", i, len(got), len(want))
		}
	}
	if n, _ := repo.counts(deb); n != 1 {
		t.Errorf("the repository saw the .deb %d times, want 1: the second download is a cache hit", n)
	}
	if n, cond := repo.counts("/debian/dists/stable/Release"); n != 2 || cond != 1 {
		t.Errorf("the repository saw Release %d times (%d conditional), want 2 (1): revalidated on the second update", n, cond)
	}
	if n, _ := repo.counts("/debian/dists/stable/main/binary-amd64/Packages"); n != 1 {
		t.Errorf("the repository saw Packages %d times, want 1", n)
	}

	if got := ask(outsider, probe); got != http.StatusForbidden {
		t.Errorf("an address of no served subnet: %d, want 403", got)
	}
	ssh := fmt.Sprintf("CONNECT %s:22 HTTP/1.1\r\nHost: %[1]s:22\r\n\r\n", repo.addr)
	if got := ask(client, ssh); got != http.StatusForbidden {
		t.Errorf("CONNECT to port 22: %d, want 403", got)
	}
	if n, _ := repo.counts("/ready"); n != 1 {
		t.Errorf("the repository saw the outsider's request: /ready %d times, want 1", n)
	}

	// What the rack boots names its proxy, at the address the machine reaches it.
	// Dialed on the namespace's thread: an http.Client would dial from another one.
	bootScript := func() (script string) {
		netnstest.Run(t, v.cliNS, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(v.serverIP.String(), "5248"), 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, "GET /ipxe/mac/02-00-00-77-00-09.ipxe HTTP/1.1\r\nHost: "+v.serverIP.String()+":5248\r\nConnection: close\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			script = string(b)
			return err
		})
		return script
	}
	param := api.KernelParamProxy + "=http://" + proxyAddr
	if script := bootScript(); !strings.Contains(script, param) {
		t.Errorf("the discovery boot script has no %s:\n%s", param, script)
	}

	// The region's settings reach the rack with its config.
	if _, err := v.admin.SetProxySettings(context.Background(), api.RackProxy{Disabled: true}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the proxy disabled by the region", func() bool {
		return ask(client, probe) == http.StatusServiceUnavailable
	})
	if script := bootScript(); strings.Contains(script, api.KernelParamProxy) {
		t.Errorf("with the proxy disabled, the boot script still names it:\n%s", script)
	}
}
