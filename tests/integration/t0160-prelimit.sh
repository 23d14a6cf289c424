#!/bin/bash
# The configured signal reaches the tasks N seconds before the time limit,
# so the trainer can write an emergency checkpoint.
. "$(dirname "$0")/lib.sh"
start_receiver ok
plugstack alpha broker=http://127.0.0.1:$RX_PORT heartbeat_min=1 prelimit=USR1@55
cat > "$WORK/trap.sh" <<'SH'
#!/bin/bash
out=$1.$SHARDNET_RANK
trap 'echo "USR1 at $(date +%s)" > $out; exit 0' USR1
start=$(date +%s); echo "start $start ${SHARDNET_PRELIMIT_SIGNAL-unset}" > $out.start
for i in $(seq 300); do sleep 0.1; done
echo "no signal" > $out
SH
chmod 755 "$WORK/trap.sh"
as_user alpha srun -N2 -n2 --time=1 --shardnet --shardnet-heartbeat=1 "$WORK/trap.sh" "$WORK/sig" > "$WORK/out" 2>&1 || true
for r in 0 1; do
    grep -q USR1 "$WORK/sig.$r" 2>/dev/null || fail "rank $r got no USR1: $(cat "$WORK/sig.$r" 2>/dev/null) $(cat "$WORK/out")"
    s=$(cut -d' ' -f2 "$WORK/sig.$r.start"); t=$(cut -d' ' -f3 "$WORK/sig.$r")
    # 60 s limit, 55 s ahead: about 5 s after the start.
    [ $((t - s)) -ge 2 ] && [ $((t - s)) -le 12 ] || fail "rank $r: USR1 after $((t - s)) s"
    [ "$(cut -d' ' -f3 "$WORK/sig.$r.start")" = 10 ] || fail "rank $r: SHARDNET_PRELIMIT_SIGNAL is '$(cut -d' ' -f3 "$WORK/sig.$r.start")', expected 10 (USR1)"
    ok "rank $r: SIGUSR1 $((t - s)) s after start (limit 60 s, prelimit 55 s), named in SHARDNET_PRELIMIT_SIGNAL"
done
hb_bodies | grep -q '"prelimit_signalled": true' || fail "heartbeats do not tell the broker the signal was sent"
ok "heartbeats report the signal"
