#!/bin/sh
# Shape this super-peer's backbone links, then serve as the unprivileged user.
# SG_LINKS: "CLASS IP RATE_BIT_PER_S" per neighbour, separated by ";" (CLASS: the htb class,
# kept fixed so that `streamglobe deploy bandwidth` can change one link's rate later; its
# fq_codel leaf stays).
set -eu
if [ -n "${SG_LINKS:-}" ]; then
    tc qdisc replace dev eth0 root handle 1: htb default 9999
    tc class replace dev eth0 parent 1: classid 1:9999 htb rate 10gbit
    echo "$SG_LINKS" | tr ';' '\n' | while read -r n ip rate; do
        [ -n "$ip" ] || continue
        tc class replace dev eth0 parent 1: classid "1:$n" htb rate "${rate}bit" ceil "${rate}bit"
        # flows share the link fairly (fq_codel), as on a real router: a heartbeat's packets do
        # not wait behind seconds of another connection's items in one FIFO
        tc qdisc replace dev eth0 parent "1:$n" fq_codel 2>/dev/null \
            || echo "warning: no fq_codel here: link $n keeps one FIFO" >&2
        tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "$ip/32" flowid "1:$n"
    done
fi
# This peer's keys are mounted read-only and owned by the host's user: the daemon's user gets a copy.
if [ -d /etc/streamglobe/tls ]; then
    rm -rf /tmp/streamglobe-tls && cp -r /etc/streamglobe/tls /tmp/streamglobe-tls
    chown -R streamglobe:streamglobe /tmp/streamglobe-tls && chmod 700 /tmp/streamglobe-tls
fi
exec setpriv --reuid=streamglobe --regid=streamglobe --init-groups \
    python3 -m thinpeer.cli superpeer serve "$@"
