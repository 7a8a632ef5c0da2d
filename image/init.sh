#!/bin/busybox sh
# /init of Ironflow's discovery image: bring up the boot NIC by DHCP, enlist and commission
# this machine with the rack named by ironflow.url=, then power off (ironflow.after=poweroff,
# the default) or wait (ironflow.after=wait). It must never exit: the kernel panics when init
# does.
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp && mount -t devpts devpts /dev/pts

# arg NAME prints NAME='s value on the kernel command line.
arg() {
	for w in $(cat /proc/cmdline); do
		case "$w" in "$1"=*) echo "${w#*=}"; return 0 ;; esac
	done
	return 1
}

# say prints a line on the console and keeps it for the rack's syslog, which is reachable
# only once the network is up.
say() { echo "ironflow: $*" | tee -a /run/boot.log; }

finish() {
	case "$(arg ironflow.after)" in
	wait)
		say "done; waiting (ironflow.after=wait)"
		while :; do sleep 3600; done
		;;
	*)
		say "done; powering off"
		sync
		poweroff -f
		;;
	esac
	while :; do sleep 3600; done
}

say "discovery image $(cat /etc/ironflow/release), kernel $(uname -r)"
while read -r m; do
	insmod "/lib/modules/$(uname -r)/$m" 2>/dev/null || say "module $m did not load (its hardware is absent?)"
done </etc/ironflow/modules

# The boot NIC: the one iPXE booted from (BOOTIF=01-aa-bb-..., as pxelinux names it), else
# every Ethernet interface in turn until one gets a lease.
bootif=$(arg BOOTIF | sed -e 's/^01-//' -e 's/-/:/g')
nics() {
	for d in /sys/class/net/*; do
		[ "$(cat "$d/type" 2>/dev/null)" = 1 ] || continue
		[ -z "$bootif" ] || [ "$(cat "$d/address")" = "$bootif" ] || continue
		echo "${d##*/}"
	done
}
for i in $(seq 20); do [ -n "$(nics)" ] && break; sleep 0.5; done
lease=""
for tries in 1 2 3; do
	for nic in $(nics); do
		say "DHCP on $nic"
		if udhcpc -i "$nic" -s /etc/ironflow/udhcpc.script -n -q -t 5 -T 2 >>/run/boot.log 2>&1; then
			lease=$nic
			break 2
		fi
	done
done
[ -n "$lease" ] || { say "no DHCP lease on $(nics | tr '\n' ' ')"; finish; }
say "$lease: $(ip -4 -o addr show dev "$lease" | awk '{print $4}')"

# The console goes to the rack's syslog as well when the command line names it
# (ironflow.syslog=HOST:PORT), the lines said so far first.
if syslog=$(arg ironflow.syslog); then
	syslogd -R "$syslog" -L -O /run/messages
	logger -t ironflow </run/boot.log
	mkfifo /run/console
	tee /dev/console </run/console | logger -t ironflow &
	exec >/run/console 2>&1
	say "console also to syslog at $syslog"
fi

if url=$(arg ironflow.url); then
	say "enlisting with $url"
	ironflow agent enlist --url "$url" && say "enlisted" || say "enlistment failed"
else
	say "no ironflow.url= on the kernel command line: nothing to enlist with"
fi
finish
