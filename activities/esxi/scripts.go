package esxi

import (
	"fmt"
	"strings"
)

// The host-side steps are POSIX shell scripts (ESXi's busybox ash runs them) so that the
// machine agent and SSH can run the same ones. Each is idempotent: a retried activity finds
// its earlier work done and neither appends twice nor backs up its own changes.
//
// The backup directory holds, once "complete" exists in it:
//	authorized_keys  exact copy (cp -p keeps mode and times) when keys-existed is "yes"
//	keys-existed     yes|no
//	running, enabled yes|no: the SSH service as found

// prelude defines the host's paths and commands and the helpers the scripts share.
func (h Host) prelude() string {
	vars := []struct{ name, value string }{
		{"K", h.Paths.AuthorizedKeysFile}, {"B", h.Paths.BackupDir},
		{"RUNNING", h.Commands.Running}, {"ENABLED", h.Commands.Enabled},
		{"START", h.Commands.Start}, {"STOP", h.Commands.Stop},
		{"ENABLE", h.Commands.Enable}, {"DISABLE", h.Commands.Disable},
	}
	var b strings.Builder
	b.WriteString("set -e\numask 077\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.name, shellQuote(v.value))
	}
	b.WriteString(`state() {
	rc=0
	sh -c "$1" >/dev/null 2>&1 || rc=$?
	case $rc in
	0) echo yes ;;
	126|127) echo "ironflow: cannot run status command: $1" >&2; exit 1 ;;
	*) echo no ;;
	esac
}
act() {
	sh -c "$1" >&2 || { echo "ironflow: command failed: $1" >&2; exit 1; }
}
`)
	return b.String()
}

// inspectScript prints "running=yes|no"; it changes nothing.
func (h Host) inspectScript() string {
	return h.prelude() + `running=$(state "$RUNNING")
echo "running=$running"
`
}

// snapshotScript records the keys and the service state (once), then starts SSH if needed.
func (h Host) snapshotScript() string {
	return h.prelude() + `if [ ! -e "$B/complete" ]; then
	rm -rf "$B.tmp"
	mkdir -p "$B.tmp"
	if [ -e "$K" ]; then
		cp -p "$K" "$B.tmp/authorized_keys"
		echo yes > "$B.tmp/keys-existed"
	else
		echo no > "$B.tmp/keys-existed"
	fi
	running=$(state "$RUNNING")
	echo "$running" > "$B.tmp/running"
	enabled=$(state "$ENABLED")
	echo "$enabled" > "$B.tmp/enabled"
	: > "$B.tmp/complete"
	sync
	rm -rf "$B"
	mv "$B.tmp" "$B"
	sync
fi
running=$(state "$RUNNING")
if [ "$running" = no ]; then
	enabled=$(state "$ENABLED")
	if [ "$enabled" = no ]; then act "$ENABLE"; fi
	act "$START"
	running=$(state "$RUNNING")
	if [ "$running" != yes ]; then echo "ironflow: the SSH service did not start" >&2; exit 1; fi
fi
`
}

// appendKeyScript adds the public key line once, never without a backup to restore.
func (h Host) appendKeyScript(pub string) string {
	return h.prelude() + "P=" + shellQuote(pub) + `
if [ ! -e "$B/complete" ]; then echo "ironflow: no backup of $K in $B, not changing it" >&2; exit 1; fi
if [ -e "$K" ] && grep -qxF "$P" "$K"; then exit 0; fi
if [ -s "$K" ] && [ "$(tail -c 1 "$K" | wc -l)" -eq 0 ]; then echo >> "$K"; fi
printf '%s\n' "$P" >> "$K"
sync
`
}

// restoreScript puts the keys and the service back as recorded and drops the backup. Without a
// complete backup nothing was changed, so there is nothing to do.
func (h Host) restoreScript() string {
	return h.prelude() + `if [ ! -e "$B/complete" ]; then rm -rf "$B.tmp"; exit 0; fi
existed=$(cat "$B/keys-existed")
if [ "$existed" = yes ]; then
	cp -p "$B/authorized_keys" "$K.ironflow-restore"
	mv -f "$K.ironflow-restore" "$K"
else
	rm -f "$K"
fi
sync
converge() {
	want=$(cat "$B/$1")
	now=$(state "$2")
	if [ "$now" = "$want" ]; then return 0; fi
	if [ "$want" = yes ]; then act "$3"; else act "$4"; fi
	now=$(state "$2")
	if [ "$now" != "$want" ]; then echo "ironflow: SSH service $1=$now, want $want as found" >&2; exit 1; fi
}
converge enabled "$ENABLED" "$ENABLE" "$DISABLE"
converge running "$RUNNING" "$START" "$STOP"
rm -rf "$B"
sync
`
}

// writeFileScript replaces path with content atomically (temp file beside it, sync, rename).
func writeFileScript(path string, content []byte) string {
	return fmt.Sprintf(`set -e
umask 077
F=%s
printf '%%s' %s > "$F.ironflow-tmp"
sync
mv -f "$F.ironflow-tmp" "$F"
sync
`, shellQuote(path), shellQuote(string(content)))
}
