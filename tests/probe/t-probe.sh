#!/bin/bash
# shardnet-probe on real captured topologies (golden files), on this machine
# (cross-checked against the kernel), on broken input, --check and --publish.
# Run by `make check` with PROBE, FIXTURES and HARNESS set.
set -uo pipefail
PROBE=${PROBE:?}; FIXTURES=${FIXTURES:?}; HARNESS=${HARNESS:?}
T=$FIXTURES/topologies; G=$FIXTURES/probe
TMP=$(mktemp -d); trap 'kill $RX 2>/dev/null; rm -rf "$TMP"' EXIT
RX=""
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# Golden files: same input, same output, byte for byte.
for n in nvidiaDGX2 24em64t-2n6c2t-pci; do
    H=(); [ $n = nvidiaDGX2 ] && H=(--host dgx2h)  # that capture has no HostName
    SOURCE_DATE_EPOCH=0 "$PROBE" -i "$T/$n.xml" "${H[@]}" > "$TMP/$n.json" && diff -u "$G/$n.json" "$TMP/$n.json" \
        && ok "$n descriptor matches golden" || fail "$n descriptor differs"
    for m in slurm-node:slurm gres-conf:gres pretty:pretty; do
        "$PROBE" -i "$T/$n.xml" "${H[@]}" --${m%%:*} > "$TMP/$n.${m##*:}" && diff -u "$G/$n.${m##*:}" "$TMP/$n.${m##*:}" \
            && ok "$n --${m%%:*} matches golden" || fail "$n --${m%%:*} differs"
    done
done
# HWLOC_XMLFILE is the same as --input.
HWLOC_XMLFILE=$T/nvidiaDGX2.xml "$PROBE" --slurm-node --host dgx2h | diff -q - "$G/nvidiaDGX2.slurm" >/dev/null \
    && ok "HWLOC_XMLFILE honoured" || fail "HWLOC_XMLFILE ignored"
# The hash covers stable fields only: a new probe time keeps it.
h0=$(SOURCE_DATE_EPOCH=0 "$PROBE" -i "$T/nvidiaDGX2.xml" | grep '"hash"')
h1=$(SOURCE_DATE_EPOCH=99 "$PROBE" -i "$T/nvidiaDGX2.xml" | grep '"hash"')
[ "$h0" = "$h1" ] && ok "hash independent of probe time" || fail "hash changed with the time"
h2=$(SOURCE_DATE_EPOCH=0 "$PROBE" -i "$T/nvidiaDGX2-minus-gpu.xml" | grep '"hash"')
[ "$h0" != "$h2" ] && ok "hash changes when a GPU goes" || fail "hash blind to a missing GPU"

# Broken input: clear error, exit 2, no crash.
for f in empty corrupt truncated; do
    "$PROBE" -i "$T/$f.xml" > "$TMP/out" 2> "$TMP/err"; rc=$?
    [ $rc = 2 ] && grep -q "shardnet-probe: topology '.*$f.xml' is" "$TMP/err" \
        && ok "$f XML: $(head -1 "$TMP/err")" || fail "$f XML: rc=$rc $(cat "$TMP/err")"
done
"$PROBE" -i "$T/missing.xml" 2> "$TMP/err"; [ $? = 2 ] && grep -q "cannot read topology" "$TMP/err" \
    && ok "missing file named" || fail "missing file: $(cat "$TMP/err")"
"$PROBE" --bogus 2> "$TMP/err"; [ $? = 2 ] && ok "unknown option refused" || fail "unknown option accepted"

# --check: unchanged passes, a removed GPU or NIC fails with one line.
"$PROBE" -i "$T/nvidiaDGX2.xml" --check "$G/nvidiaDGX2.json" && ok "--check unchanged node: exit 0" || fail "--check unchanged"
out=$("$PROBE" -i "$T/nvidiaDGX2-minus-gpu.xml" --check "$G/nvidiaDGX2.json"); rc=$?
[ $rc = 1 ] && [ "$out" = "shardnet-probe: accelerator V100 at 0000:34:00.0 is missing" ] \
    && ok "--check removed GPU: $out" || fail "--check removed GPU: rc=$rc '$out'"
out=$("$PROBE" -i "$T/24em64t-minus-ib.xml" --check "$G/24em64t-2n6c2t-pci.json"); rc=$?
[ $rc = 1 ] && [ "$out" = "shardnet-probe: NIC mlx4_0 is missing" ] && ok "--check removed NIC: $out" || fail "--check removed NIC: rc=$rc '$out'"
echo '{"accelerators": 3}' > "$TMP/bad.json"
out=$("$PROBE" -i "$T/nvidiaDGX2.xml" --check "$TMP/bad.json"); [ $? = 1 ] && grep -q malformed <<<"$out" \
    && ok "--check malformed descriptor named" || fail "--check malformed: $out"

# This machine: cross-checked against the kernel and the other sources.
"$PROBE" > "$TMP/live.json" || fail "live probe failed"
/usr/bin/python3 - "$TMP/live.json" <<'PY' && ok "live descriptor agrees with nproc, /proc/meminfo, hostname and UCX" || fail "live descriptor"
import json, os, socket, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "shardnet.node/1"
assert d["host"] == socket.gethostname(), d["host"]
assert d["cpu"]["pus"] == os.cpu_count(), (d["cpu"]["pus"], os.cpu_count())
mem = [int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal:")][0]
assert d["memory"]["total_bytes"] == mem and d["memory"]["source"] == "meminfo", d["memory"]
assert d["ucx"] is not None and any(r["transport"] in ("tcp", "posix", "sysv", "self") for r in d["ucx"]), d["ucx"]
assert d["software"]["hwloc"] and d["software"]["ucx"]
assert d["hash"].startswith("sha256:") and len(d["hash"]) == 71
PY
# NICs are named from sysfs on this machine: the same names and PCI functions as hwloc's own OS devices.
lstopo-no-graphics --of xml "$TMP/lstopo.xml" --force
/usr/bin/python3 - "$TMP/live.json" "$TMP/lstopo.xml" <<'PY' && ok "live NICs match hwloc's OS devices: $(cat "$TMP/nics")" || fail "live NICs differ from hwloc's"
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
want = {}
for pci in ET.parse(sys.argv[2]).iter("object"):
    if pci.get("type") != "PCIDev": continue
    cls = int(pci.get("pci_type").split()[0], 16)
    if cls >> 8 != 0x02 and cls != 0x0c06: continue
    nets = sorted(o.get("name") for o in pci.findall("object") if o.get("osdev_type") == "2")
    ofed = [o.get("name") for o in pci.findall("object") if o.get("osdev_type") == "3"]
    if nets or ofed:
        want[pci.get("pci_busid")] = (ofed[0] if ofed else nets[0], nets)
got = {n["pci_bus"]: (n["name"], sorted(n["netdevs"])) for n in d["nics"]}
assert got == want, (got, want)
open(sys.argv[1].replace("live.json", "nics"), "w").write(" ".join("%s=%s" % (b, v[0]) for b, v in sorted(got.items())))
PY
"$PROBE" --check "$TMP/live.json" && ok "--check of this machine against its own descriptor: exit 0" || fail "--check live"
"$PROBE" --bandwidth > "$TMP/bw"; [ $? = 0 ] && grep -q "no GPUs" "$TMP/bw" && ok "--bandwidth without GPUs: $(cat "$TMP/bw")" \
    || fail "--bandwidth without GPUs"

# --publish to a real HTTP receiver (the broker's /v1/nodes once it exists).
/usr/bin/python3 "$HARNESS/receiver.py" --port-file "$TMP/port" --log "$TMP/rx.log" >/dev/null 2>&1 &
RX=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
echo "probe-token" > "$TMP/token"
"$PROBE" -i "$T/nvidiaDGX2.xml" --publish "http://127.0.0.1:$(cat "$TMP/port")" --token-file "$TMP/token" > "$TMP/pub.json" \
    || fail "--publish failed"
/usr/bin/python3 - "$TMP/rx.log" "$TMP/pub.json" <<'PY' && ok "--publish posted the descriptor to /v1/nodes" || fail "--publish"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 1 and recs[0]["path"] == "/v1/nodes", recs
assert recs[0]["auth"] == "Bearer probe-token"
assert recs[0]["body"]["hash"] == json.load(open(sys.argv[2]))["hash"]
PY
"$PROBE" -i "$T/nvidiaDGX2.xml" --publish "http://127.0.0.1:$("$HARNESS/free_ports.py" 1)" > /dev/null 2> "$TMP/err"
[ $? = 1 ] && grep -q "publishing to .* failed" "$TMP/err" && ok "--publish to a closed port: $(cat "$TMP/err")" || fail "--publish closed port"

echo "# probe: $fails failed"
[ $fails = 0 ]
