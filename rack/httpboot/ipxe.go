package httpboot

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/ironflow/ironflow/region/api"
)

// BootEnvLocal makes a machine boot from its local disk.
const BootEnvLocal = "local"

// Boot is what a machine boots next. Kernel and Initrds are paths in the boot directory
// (served under /boot/) or absolute http(s) URLs.
type Boot struct {
	BootEnv string
	Kernel  string
	Initrds []string
	Cmdline string
}

// MachineLookup finds what a machine boots; found is false for a MAC nobody knows, which then
// boots the discovery environment.
type MachineLookup interface {
	BootByMAC(ctx context.Context, mac net.HardwareAddr) (boot Boot, found bool, err error)
}

// validate refuses boot parameters that would break out of their line in the script or that
// name no kernel.
func (b Boot) validate() error {
	for _, v := range append([]string{b.BootEnv, b.Kernel, b.Cmdline}, b.Initrds...) {
		if strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("control character in %q", v)
		}
	}
	if b.BootEnv != BootEnvLocal && b.Kernel == "" {
		return fmt.Errorf("boot env %q names no kernel", b.BootEnv)
	}
	for _, v := range append([]string{b.Kernel}, b.Initrds...) {
		if strings.ContainsAny(v, " \t") {
			return fmt.Errorf("space in file %q", v)
		}
	}
	return nil
}

// bootScript chains every iPXE client to the script of its own MAC, and keeps retrying while
// the rack cannot answer (for example during a region outage with no cached answer).
var bootScript = template.Must(template.New("boot").Parse(`#!ipxe
# Ironflow: continue with this machine's own script.
:retry
chain --replace {{.}}/ipxe/mac/${netX/mac:hexhyp}.ipxe || goto wait
:wait
echo Ironflow: no boot script yet, retrying in 10 seconds
sleep 10
goto retry
`))

// enlistScript has an unknown machine report what iPXE knows of it to the rack (GET
// /ipxe/enlist, serveEnlist), which answers with the discovery environment; should the rack
// refuse the report, the machine boots the discovery environment anyway. ${uuid} keeps its
// own type (formatting its 16 raw bytes as uristring would not give the UUID). The SMBIOS
// strings are sent as hex (hexraw, parseBootFacts decodes them): iPXE's uristring leaves
// "&", "=" and "+" as they are (a real iPXE sent serial "a&b=c" as a parameter "b" and "+"
// for a space), and firmware strings hold such characters.
var enlistScript = template.Must(template.New("enlist").Parse(`#!ipxe
# Ironflow: unknown machine {{.MAC}}, enlisting
chain --replace {{.Base}}/ipxe/enlist?mac=${netX/mac:hexhyp}&uuid=${uuid}&serial=${serial:hexraw}&manufacturer=${manufacturer:hexraw}&product=${product:hexraw}&buildarch=${buildarch:uristring}&platform=${platform:uristring} || goto discovery
:discovery
{{template "machine" .Discovery}}`))

type enlistScriptData struct {
	MAC, Base string
	Discovery machineScriptData
}

var machineScript = template.Must(enlistScript.New("machine").Parse(`{{if .What}}#!ipxe
# Ironflow: {{.What}} {{.MAC}}, boot env {{.BootEnv}}
{{end}}{{range .Notes}}echo Ironflow: {{.}}
{{end}}{{if .Local}}exit
{{else}}kernel {{.Kernel}}{{range .InitrdNames}} initrd={{.}}{{end}}{{if .Cmdline}} {{.Cmdline}}{{end}}
{{range .Initrds}}initrd {{.}}
{{end}}boot
{{end}}`))

type machineScriptData struct {
	What, MAC, BootEnv, Kernel, Cmdline string
	Local                               bool
	Initrds, InitrdNames                []string
	Notes                               []string // echoed before booting; iPXE-safe (scriptNote)
}

func (s *Server) serveBootScript(w http.ResponseWriter, r *http.Request) {
	writeScript(w, bootScript, baseURL(r))
}

func (s *Server) serveMachineScript(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	name, ok := strings.CutSuffix(file, ".ipxe")
	mac, err := net.ParseMAC(name)
	if !ok || err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not <mac>.ipxe", file))
		return
	}
	boot, found, err := s.cfg.Machines.BootByMAC(r.Context(), mac)
	if err != nil {
		s.log.Warn("machine lookup failed", "mac", mac.String(), "error", err)
		writeError(w, http.StatusServiceUnavailable, "machine lookup failed; retry")
		return
	}
	base := baseURL(r)
	if !found {
		writeScript(w, enlistScript, enlistScriptData{MAC: mac.String(), Base: base, Discovery: s.discoveryScript(base, mac, "")})
		return
	}
	if err := boot.validate(); err != nil {
		s.log.Error("invalid boot parameters", "mac", mac.String(), "error", err)
		writeError(w, http.StatusInternalServerError, "invalid boot parameters for "+mac.String())
		return
	}
	writeScript(w, machineScript, bootScriptData(base, "machine", mac, s.withProxy(base, boot)))
}

// withProxy adds the rack's HTTP proxy for clients reaching the rack at base to what a
// kernel boots with (api.KernelParamProxy), while the rack serves one.
func (s *Server) withProxy(base string, boot Boot) Boot {
	if s.cfg.ProxyURL == nil || boot.Kernel == "" {
		return boot
	}
	u, err := url.Parse(base)
	if err != nil {
		return boot
	}
	if p := s.cfg.ProxyURL(u.Hostname()); p != "" {
		boot.Cmdline = strings.TrimSpace(boot.Cmdline + " " + api.KernelParamProxy + "=" + p)
	}
	return boot
}

// bootScriptData is the script data of booting boot.
func bootScriptData(base, what string, mac net.HardwareAddr, boot Boot) machineScriptData {
	data := machineScriptData{What: what, MAC: mac.String(), BootEnv: boot.BootEnv,
		Local: boot.BootEnv == BootEnvLocal, Kernel: assetURL(base, boot.Kernel), Cmdline: boot.Cmdline}
	for _, initrd := range boot.Initrds {
		data.Initrds = append(data.Initrds, assetURL(base, initrd))
		data.InitrdNames = append(data.InitrdNames, path.Base(initrd))
	}
	return data
}

// discoveryScript boots the discovery environment (validated by New), telling it where the
// rack is (api.KernelParamURL, which `ironflow agent enlist` reads from /proc/cmdline), which
// NIC it booted from (BOOTIF, as pxelinux names it), where its console goes
// (api.KernelParamSyslog, when the rack receives syslog) and its HTTP proxy (withProxy).
// what is "" inside the enlistment script, whose header is already written.
func (s *Server) discoveryScript(base string, mac net.HardwareAddr, what string, notes ...string) machineScriptData {
	boot := s.withProxy(base, s.cfg.Discovery)
	params := []string{boot.Cmdline, api.KernelParamURL + "=" + base, "BOOTIF=01-" + strings.ReplaceAll(mac.String(), ":", "-")}
	if syslog := s.cfg.Syslog; syslog.IsValid() {
		host := syslog.Addr().String()
		if syslog.Addr().IsUnspecified() {
			host, _, _ = net.SplitHostPort(strings.TrimPrefix(base, "http://"))
		}
		params = append(params, api.KernelParamSyslog+"="+net.JoinHostPort(host, strconv.Itoa(int(syslog.Port()))))
	}
	boot.Cmdline = strings.TrimSpace(strings.Join(params, " "))
	data := bootScriptData(base, what, mac, boot)
	data.Notes = notes
	return data
}

func writeScript(w http.ResponseWriter, t *template.Template, data any) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // what a machine boots changes
	w.Write(b.Bytes())
}

// baseURL is this server as the client reached it, so scripts work on every rack interface.
func baseURL(r *http.Request) string {
	host := r.Host
	if host == "" {
		if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			host = addr.String()
		}
	}
	return "http://" + host
}

// assetURL turns a boot-directory path into a URL on this server; absolute URLs pass through.
func assetURL(base, ref string) string {
	if strings.HasPrefix(ref, "http://") || strings.HasPrefix(ref, "https://") {
		return ref
	}
	segs := strings.Split(strings.TrimPrefix(ref, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return base + "/boot/" + strings.Join(segs, "/")
}
