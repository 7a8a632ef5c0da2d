#!/bin/sh
# udhcpc's hook in Ironflow's discovery image: configure the leased address, route and
# resolvers on $interface.
case "$1" in
deconfig)
	ip addr flush dev "$interface"
	ip link set "$interface" up
	;;
bound | renew)
	ip addr flush dev "$interface"
	ifconfig "$interface" "$ip" netmask "${subnet:-255.255.255.0}" up
	for r in $router; do
		route add default gw "$r" dev "$interface"
		break
	done
	: >/etc/resolv.conf
	for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
	;;
esac
exit 0
