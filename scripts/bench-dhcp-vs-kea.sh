#!/usr/bin/env bash
# Ironflow's DHCP server against Kea (kea-dhcp4, memfile with persist), both driven by the same
# perfdhcp in relay mode, alternating, in a network namespace of their own. Each server is
# pinned to CPU 0 (Ironflow with GOMAXPROCS=1), perfdhcp to CPU 1. Ironflow writes every lease
# to its write-ahead log with fsync before the ACK; Kea's memfile appends without fsync.
#
# Needs root, iproute2, perfdhcp and kea-dhcp4 (Debian: apt-get install kea-admin
# kea-dhcp4-server); without perfdhcp or kea-dhcp4 it says so and exits 0.
# Knobs: IRONFLOW_PERFDHCP_RATES (offered DORA/s, default "3000 6000"),
# IRONFLOW_PERFDHCP_SECONDS (per run, default 10), IRONFLOW_PERFDHCP_RUNS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in perfdhcp kea-dhcp4; do
	if ! command -v "$tool" >/dev/null; then
		echo "bench-dhcp-vs-kea: skipped, $tool is not installed (apt-get install kea-admin kea-dhcp4-server)"
		exit 0
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	echo "bench-dhcp-vs-kea: skipped, network namespaces need root"
	exit 0
fi

rates=${IRONFLOW_PERFDHCP_RATES:-3000 6000}
seconds=${IRONFLOW_PERFDHCP_SECONDS:-10}
runs=${IRONFLOW_PERFDHCP_RUNS:-3}
server=10.99.0.1 relay=10.99.0.2 subnet=10.99.0.0/16
ns=ironflow-perfdhcp-$$
work=$(mktemp -d)
server_pid=""
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	ip netns del "$ns" 2>/dev/null || true
	[ -n "${IRONFLOW_PERFDHCP_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" addr add "$server/16" dev lo
ip -n "$ns" addr add "$relay/16" dev lo
go test -c -o "$work/dhcp.test" ./rack/dhcp/

cat >"$work/kea.json" <<KEA
{"Dhcp4": {
  "interfaces-config": {"interfaces": ["lo/$server"], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "name": "$work/kea-leases.csv", "lfc-interval": 0},
  "valid-lifetime": 3600,
  "subnet4": [{"id": 1, "subnet": "$subnet", "pools": [{"pool": "10.99.1.0 - 10.99.255.254"}]}],
  "loggers": [{"name": "kea-dhcp4", "severity": "ERROR", "output_options": [{"output": "$work/kea.log"}]}]
}}
KEA

# start_server NAME: starts the server pinned to CPU 0 and waits until it listens.
start_server() {
	rm -f "$work/kea-leases.csv"*
	case $1 in
	ironflow)
		IRONFLOW_DHCP_BENCH_SERVE=$server:67 IRONFLOW_DHCP_BENCH_SUBNET=$subnet GOMAXPROCS=1 \
			ip netns exec "$ns" taskset -c 0 "$work/dhcp.test" -test.run '^TestServeForPerfdhcp$' -test.v >"$work/server.log" 2>&1 &
		server_pid=$!
		until grep -q "serving DHCP" "$work/server.log"; do
			kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
			sleep 0.1
		done
		;;
	kea)
		KEA_LOCKFILE_DIR=$work KEA_PIDFILE_DIR=$work \
			ip netns exec "$ns" taskset -c 0 kea-dhcp4 -c "$work/kea.json" >"$work/server.log" 2>&1 &
		server_pid=$!
		until ip netns exec "$ns" ss -uln | grep -q "$server:67"; do
			kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
			sleep 0.1
		done
		;;
	esac
}

stop_server() {
	kill "$server_pid"
	wait "$server_pid" 2>/dev/null || true
	server_pid=""
}

# measure NAME RATE: one perfdhcp run; prints "exchanges/s drops%".
measure() {
	start_server "$1"
	ip netns exec "$ns" taskset -c 1 perfdhcp -4 -l "$relay" -L 67 -N 67 -r "$2" -p "$seconds" -R 1000000 "$server" >"$work/perfdhcp.out" 2>&1 || true
	stop_server
	cp "$work/perfdhcp.out" "$work/perfdhcp-$1-$2.out"
	awk '
		/^Rate:/ { rate = $2 }
		/sent packets:/ { sent[++s] = $3 }
		/received packets:/ { recv[++r] = $3 }
		END {
			lost = (sent[1] + sent[2]) - (recv[1] + recv[2])
			printf "%d %.1f\n", rate, (sent[1] + sent[2]) ? 100 * lost / (sent[1] + sent[2]) : 100
		}' "$work/perfdhcp.out"
}

echo "perfdhcp $(perfdhcp -v 2>&1 | head -1), kea-dhcp4 $(kea-dhcp4 -v), ${seconds}s per run, relay mode, one core each"
printf "%-9s %-8s %-4s %14s %8s\n" offered server run "4-way ex./s" drops
for rate in $rates; do
	for run in $(seq "$runs"); do
		for name in ironflow kea; do
			read -r got drops < <(measure "$name" "$rate")
			printf "%-9s %-8s %-4s %14s %7s%%\n" "$rate/s" "$name" "$run" "$got" "$drops"
		done
	done
done
