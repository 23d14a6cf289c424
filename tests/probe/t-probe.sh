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

# Untrusted strings: edited copies of a fixture. A host name that is not a
# Slurm node name stops the probe (exit 2, naming the field) in every mode;
# nothing reaches a NodeName= line.
edit() {  # NAME OLD NEW [OLD NEW]...: $TMP/NAME.xml, the 24em64t fixture with each OLD (bytes) replaced
    /usr/bin/python3 -c '
import os, sys
s = open(sys.argv[1], "rb").read()
a = [os.fsencode(x) for x in sys.argv[3:]]
for old, new in zip(a[::2], a[1::2]):
    assert old in s, old
    s = s.replace(old, new)
open(sys.argv[2], "wb").write(s)' "$T/24em64t-2n6c2t-pci.xml" "$TMP/$1.xml" "${@:2}" || fail "editing a copy for $1"
}
edit host-newline mirage004 'evil&#10;NodeName=evil CPUs=1 Gres=gpu:H100-SXM:8'
edit host-space mirage004 'node 01 Features=evil'
for h in host-newline host-space; do
    for m in --slurm-node --gres-conf --pretty ""; do
        out=$("$PROBE" -i "$TMP/$h.xml" $m 2> "$TMP/err"); rc=$?
        [ $rc = 2 ] && [ -z "$out" ] && grep -q "the topology's HostName (.*$h.xml) is not a valid Slurm node name" "$TMP/err" \
            && ok "$h ${m:-json}: exit 2, $(cut -c1-90 "$TMP/err")" || fail "$h ${m:-json}: rc=$rc out='$out' $(cat "$TMP/err")"
    done
done
"$PROBE" -i "$T/nvidiaDGX2.xml" --host 'a,b' --slurm-node > /dev/null 2> "$TMP/err"; [ $? = 2 ] && grep -q -- "--host is not a valid Slurm node name: ','" "$TMP/err" \
    && ok "--host checked too" || fail "--host a,b: $(cat "$TMP/err")"
"$PROBE" -i "$TMP/host-space.xml" --host node01 --slurm-node | grep -q '^NodeName=node01 CPUs=24 ' \
    && ok "--host replaces a bad topology HostName" || fail "--host over a bad HostName"
# Invalid UTF-8 in a GPU model and a netdev name. The contract: the probe
# never writes invalid UTF-8. An hwloc that reads such a topology (2.9) gives
# names whose bad bytes the probe writes as U+FFFD; one that refuses it
# (2.12) is a malformed topology: exit 2 with a message naming it.
GPU0='0302 [10de:06d2] [00de:0030] a3" pci_link_speed="4.000000">'  # the fixture's first Tesla M2070, which has no name
edit bad-utf8 "$GPU0" "$GPU0"$'<info name="PCIDevice" value="Tesla \xff\xc0M2070\xed\xa0\x80"/>' 'name="eth0"' $'name="eth\xe2\x820"'
SOURCE_DATE_EPOCH=0 "$PROBE" -i "$TMP/bad-utf8.xml" > "$TMP/bad-utf8.json" 2> "$TMP/err"; rc=$?
if [ $rc = 2 ]; then
    [ ! -s "$TMP/bad-utf8.json" ] && grep -q "shardnet-probe: topology '.*bad-utf8.xml' is" "$TMP/err" \
        && ok "invalid UTF-8 in the topology, refused by this hwloc: exit 2, $(head -c 100 "$TMP/err")" \
        || fail "invalid UTF-8 refused without the message: $(cat "$TMP/err")"
elif [ $rc = 0 ] && /usr/bin/python3 - "$TMP/bad-utf8.json" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw.decode("utf-8"))  # strict: raises on invalid UTF-8
models = [a["model"] for a in d["accelerators"]]
assert any(m and "\ufffd" in m and "M2070" in m for m in models), models
assert any("\ufffd" in n["name"] for n in d["nics"]), [n["name"] for n in d["nics"]]
PY
then ok "invalid UTF-8 in the topology: valid JSON, bytes replaced by U+FFFD"
else fail "invalid UTF-8: rc=$rc, invalid JSON or bytes not replaced: $(cat "$TMP/err")"; fi
if [ $rc = 0 ]; then
    "$PROBE" -i "$TMP/bad-utf8.xml" --pretty | iconv -f UTF-8 -t UTF-8 > /dev/null && ok "--pretty output valid UTF-8 too" || fail "--pretty invalid UTF-8"
fi

# Groups nested 200k deep. The contract: the probe never crashes, whatever
# hwloc does with it; read in a child, so that an hwloc that crashes on it
# (hwloc 2.9: SIGSEGV, deep recursion) is exit 2 naming the crash, and one
# that reads it (or refuses it) answers as for any other topology.
/usr/bin/python3 - "$TMP/deep.xml" <<'PY'
import sys
n = 200000
g = '<object type="Group" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1">\n'
with open(sys.argv[1], "w") as f:
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n')
    f.write('<object type="Machine" os_index="0" cpuset="0x1" complete_cpuset="0x1" allowed_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1">\n')
    f.write('<object type="NUMANode" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" local_memory="1000000"/>\n')
    f.write(g * n)
    f.write('<object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1"/>\n')
    f.write('</object>\n' * (n + 1) + '</topology>\n')
PY
for m in "" --slurm-node; do
    "$PROBE" -i "$TMP/deep.xml" $m > "$TMP/out" 2> "$TMP/err"; rc=$?
    if [ $rc = 2 ]; then
        grep -q "shardnet-probe: topology '.*deep.xml' is" "$TMP/err" \
            && ok "Groups nested 200k deep ${m:-json}: exit 2, $(cut -c1-100 "$TMP/err")" || fail "deep XML ${m:-json}: rc=2 $(cat "$TMP/err")"
    else
        [ $rc = 0 ] && [ -s "$TMP/out" ] && ok "Groups nested 200k deep ${m:-json}: read by this hwloc" \
            || fail "deep XML ${m:-json}: rc=$rc $(head -c 300 "$TMP/err")"
    fi
done
# Objects without nodesets: exit 2 with a message (hwloc refuses it, or crashes and the child reports it).
edit no-nodeset ' nodeset=' ' x=' ' complete_nodeset=' ' y=' ' allowed_nodeset=' ' z='
"$PROBE" -i "$TMP/no-nodeset.xml" > /dev/null 2> "$TMP/err"; rc=$?
[ $rc = 2 ] && [ -s "$TMP/err" ] \
    && ok "objects without nodesets: exit 2, $(head -c 100 "$TMP/err")" || fail "no-nodeset: rc=$rc"
# An hwloc 3 XML: an hwloc that cannot read it (2.9) is told as such, never
# as a corrupt file (exit 2); one that reads it (2.12 reads 3.0) answers.
edit v3 '<topology version="2.0">' '<topology version="3.0">'
"$PROBE" -i "$TMP/v3.xml" > "$TMP/out" 2> "$TMP/err"; rc=$?
if [ $rc = 2 ]; then
    grep -q "is in hwloc XML format 3.0, which needs hwloc 3.x or later" "$TMP/err" && ! grep -q corrupt "$TMP/err" \
        && ok "hwloc 3.0 XML: $(cut -c1-100 "$TMP/err")" || fail "v3 XML: rc=$rc $(cat "$TMP/err")"
else
    [ $rc = 0 ] && /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out" \
        && ok "hwloc 3.0 XML: read by this hwloc" || fail "v3 XML: rc=$rc $(cat "$TMP/err")"
fi

# Class look-alikes: names and ids of other products must not borrow a class.
lookalike() {  # MODEL PCI-ID WANT
    edit look "$GPU0" "${GPU0/06d2/$2}<info name=\"PCIDevice\" value=\"$1\"/>"
    got=$("$PROBE" -i "$TMP/look.xml" | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin)["accelerators"][0]; print(a["class"], a["pci_id"])')
    [ "$got" = "$3 10de:$2" ] && ok "look-alike '$1' [10de:$2]: $got" || fail "look-alike '$1' [10de:$2]: got '$got', want '$3 10de:$2'"
}
grep -qF "$GPU0" "$T/24em64t-2n6c2t-pci.xml" || fail "fixture changed: no Tesla M2070 at 06:00.0 to edit"
lookalike "GA100GL [A30 PCIe]" 20b7 A30
lookalike "GA107GL [RTX A1000]" 25b0 RTX-A1000
lookalike "GH100 [GH200 120GB / 480GB]" 2342 GH200
lookalike "GV100GL [Quadro GV100]" 1dba Quadro-GV100
lookalike "GV100 [TITAN V]" 1d81 TITAN-V
lookalike "NVIDIA A1000X" 1234 unknown
lookalike "NVIDIA XH200" 1234 unknown

# The new captured topologies (../shared/topologies, copied in): golden facts.
T2() { "$PROBE" -i "$T/$1.xml" --host node1 "${@:2}"; }
T2 32em64t-2n8c2t-pci-normalio | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
nics = {n["name"]: n["kind"] for n in d["nics"]}
assert nics == {"mlx5_0": "infiniband", "eth0": "ethernet", "eth1": "ethernet"}, nics  # ConnectX-4, PCI class 0207, ib0 + LID 0x1
amd = [a for a in d["accelerators"] if a["pci_id"] == "1002:6798"]
assert len(amd) == 1 and amd[0]["model"] == "AMD Radeon R9 200 / HD 7900 Series", amd  # 0x0300 with an OpenCL device
assert not [a for a in d["accelerators"] if a["pci_id"].startswith("102b:")]  # the Matrox management VGA
assert "InfiniBand" in d["fabric"]["summary"] and "RoCE" not in d["fabric"]["summary"], d["fabric"]
' && ok "32em64t: ConnectX-4 (class 0207) is InfiniBand, the Tahiti with OpenCL is a GPU, the Matrox is not" || fail "32em64t golden facts"
T2 64amd64-4p2n4ca2co | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
got = {n["index"]: n["cpus"] for n in d["cpu"]["numa"]}
want = {0: "0-7", 1: "8-15", 6: "16-23", 7: "24-31", 2: "32-39", 3: "40-47", 4: "48-55", 5: "56-63"}
assert got == want, got
' && ok "64amd64: NUMA nodes under L3 caches have their own cpusets (0-7, 8-15, ...)" || fail "64amd64 NUMA cpusets"
T2 40intel64-2g2n4c+pcilocality | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
nics = {n["name"]: n["kind"] for n in d["nics"]}
assert nics["qib0"] == "infiniband", nics
' && ok "40intel64: qib0 (QLogic) is InfiniBand" || fail "40intel64 NICs"
[ "$(T2 40intel64-2g2n4c+pcilocality --slurm-node)" = "NodeName=node1 CPUs=40 Boards=2 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=1 RealMemory=524274 Features=InfiniBand,Ethernet" ] \
    && ok "40intel64: hwloc Groups are Slurm Boards (Boards=2 SocketsPerBoard=2)" || fail "40intel64 --slurm-node: $(T2 40intel64-2g2n4c+pcilocality --slurm-node)"
T2 power8gpudistances --pretty | grep -q "4 x unknown" && ok "power8: P100s (10de:15f9, no class) stay unknown" || fail "power8 classes"
# NVLink from hwloc's NVLinkBandwidth distances: each P100 has one GPU peer
# (and its CPU package, which is no GPU interconnect) in the XML's matrix.
T2 power8gpudistances | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["fabric"]["summary"] == ["NVLink"], d["fabric"]
assert [a["nvlink_peers"] for a in d["accelerators"]] == [1, 1, 1, 1], d["accelerators"]
' && ok "power8: NVLink pairs from hwloc distances (one GPU peer per P100)" || fail "power8 NVLink"
# Gaudi (Habana Labs, 1da3) devices get their /dev/accel/accelN files in
# gres.conf: the DGX-2 capture with its V100s' ids made Gaudi's (1da3:1000).
sed 's/\[10de:1db8\]/[1da3:1000]/' "$T/nvidiaDGX2.xml" > "$TMP/gaudi.xml"
g=$("$PROBE" -i "$TMP/gaudi.xml" --host gnode --gres-conf)
[ "$(grep -c 'File=/dev/accel/accel' <<<"$g")" = 16 ] && grep -q 'File=/dev/accel/accel15 ' <<<"$g" \
    && ok "Gaudi gres.conf lines name /dev/accel/accelN" || fail "Gaudi gres.conf: $g"
# NVSwitch from PCI ids: the DGX-2 capture without hwloc's subtype still
# has 11 NVSwitches by id (10de:1ac2); the twelfth records no PCI id and
# cannot be decided, so it is not counted.
sed 's/ subtype="NVSwitch"//' "$T/nvidiaDGX2.xml" > "$TMP/dgx2-nosubtype.xml"
"$PROBE" -i "$TMP/dgx2-nosubtype.xml" --host dgx2h | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["fabric"] == {"summary": ["NVSwitch"], "nvswitches": 11}, d["fabric"]
' && ok "DGX-2 without NVSwitch subtype: 11 NVSwitches by PCI id" || fail "DGX-2 NVSwitch by id"

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
