#!/bin/bash
# Issue 32: a docker:// image through a real registry, and the clusters a
# run in an image cannot go to. Debian's docker-registry serves on loopback
# (plain HTTP, named insecure in a registries.conf drop-in, as a site does
# for such a registry). The image is pushed there from an OCI layout built
# from busybox.
#  1. References the registry cannot give (no such repository, no registry,
#     no such digest) are refused by shard run, named, nothing submitted.
#  2. A 2-node spec with image docker://REG/shardnet/busybox:train runs on
#     beta (broker B) in the digest the registry had at submit.
#  3. The registry's tag moves to another image, the registry stops, beta2
#     dies. B's other cluster, gamma, has idle room but its image_roots do
#     not hold the user's image cache: rejected, the reason in PLACEMENT.
#     Attempt 2 goes to broker A's alpha and runs the first digest.
#  4. alpha's nodes probed where Slurm has no oci.conf: the capacity search
#     lists alpha as refused (no container runtime) and shard run submits
#     nothing there; shardnet-probe --check fails a node whose runtime went.
#     A layout outside gamma's image_roots: gamma refused, the reason shown.
. "$(dirname "$0")/lib.sh"
for t in docker-registry skopeo crun umoci; do
    command -v "$t" >/dev/null || fail "$t is not installed (scripts/install-deps.sh installs it)"
done
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 2 >/dev/null || fail "the cluster gamma did not come up"
DROPIN=""
cleanup_reg() {
    [ -z "$DROPIN" ] || rm -f "$DROPIN"
    "$HARNESS/clusters.sh" remove "$SCRATCH" gamma || true
    cleanup_lib
}
trap cleanup_reg EXIT
start_federation
# B owns beta and gamma; gamma reads images only under a site dir.
/usr/bin/python3 - "$FED/b.json" "$SCRATCH/gamma/slurm.conf" "$WORK/site-images" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["clusters"]["gamma"] = {"slurm_conf": sys.argv[2], "region": "eu", "image_roots": [sys.argv[3]]}
json.dump(c, open(sys.argv[1], "w"))
PY
fed_restart B
L=$WORK/images
"$HARNESS/oci-image.sh" "$L" train first >/dev/null || fail "could not build the first image"
"$HARNESS/oci-image.sh" "$L" other second >/dev/null || fail "could not build the second image"

# The registry, on loopback, plain HTTP.
REG_PORT=$("$HARNESS/free_ports.py" 1)
REG=127.0.0.1:$REG_PORT
cat > "$WORK/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $WORK/registry}}
http: {addr: "$REG"}
YML
docker-registry serve "$WORK/registry.yml" >> "$WORK/registry.log" 2>&1 &
REG_PID=$!; RX_PIDS+=($REG_PID)
for _ in $(seq 100); do curl -sf "http://$REG/v2/" >/dev/null && break; sleep 0.1; done
curl -sf "http://$REG/v2/" >/dev/null || fail "the registry did not start: $(cat "$WORK/registry.log")"
DROPIN=/etc/containers/registries.conf.d/shardnet-test-$REG_PORT.conf
mkdir -p /etc/containers/registries.conf.d
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" > "$DROPIN"; chmod 644 "$DROPIN"
skopeo copy --quiet "oci:$L:train" "docker://$REG/shardnet/busybox:train" || fail "pushing the first image"
reg_digest() { skopeo inspect "docker://$REG/shardnet/busybox:train" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["Digest"])'; }
FIRST=$(reg_digest) || fail "skopeo inspect"
ok "registry at $REG: shardnet/busybox:train is $FIRST"

# 1. What the registry cannot give: refused at submit, named, nothing submitted.
closed=$(closed_port)
images_before=$(ls "$TEST_HOME/.shardnet/images" 2>/dev/null || true)
for ref in "docker://$REG/shardnet/none:train" "docker://127.0.0.1:$closed/shardnet/busybox:train" \
           "docker://$REG/shardnet/busybox@sha256:$(printf '0%.0s' $(seq 64))"; do
    printf 'name: bad\ncommand: /bin/true\nimage: %s\n' "$ref" > "$WORK/bad.yaml"; chmod 644 "$WORK/bad.yaml"
    rc=0; out=$(shard run "$WORK/bad.yaml" --cluster beta 2>&1) || rc=$?
    [ $rc = 2 ] || fail "image $ref: exit $rc, expected 2: $out"
    grep -qF "$ref" <<<"$out" && grep -q "nothing submitted" <<<"$out" || fail "the error does not name $ref: $out"
    echo "  $(cut -c1-240 <<<"$out")"
done
queued=$(slurm alpha squeue -h && slurm beta squeue -h) || fail "squeue failed: cannot tell whether a bad reference submitted a job"
[ -z "$queued" ] || fail "a bad image reference submitted a job: $queued"
[ "$(shard runs --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')" = 0 ] || fail "a bad image reference created a run"
ok "no such repository, no registry, no such digest: refused by shard run, named, nothing submitted"

# 2. The run, in the registry's image.
cat > "$WORK/task.sh" <<'SH'
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK/$SHARDNET_WORLD_SIZE run=$SHARDNET_RUN digest=$SHARDNET_IMAGE_DIGEST content=$(cat /content)" \
    > "seen.$SHARDNET_ATTEMPT.$SHARDNET_RANK"
n=600; [ "$SHARDNET_ATTEMPT" -gt 1 ] && n=6
for s in $(seq 1 $n); do echo "$s" > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 644 "$WORK/task.sh"
cat > "$WORK/reg.yaml" <<YAML
name: reg
command: /bin/sh $WORK/task.sh
nodes: 2
heartbeat: 1
requeue: federated
image: docker://$REG/shardnet/busybox:train
YAML
chmod 644 "$WORK/reg.yaml"
out=$(shard run "$WORK/reg.yaml" --cluster beta) || fail "shard run reg: $out"
echo "$out" | sed 's/^/  /'
run=$(awk '$1 == "run" {print $2}' <<<"$out")
grep -q "^image  *docker://$REG/shardnet/busybox:train pinned to $FIRST$" <<<"$out" || fail "shard run did not pin the registry's digest $FIRST"
cache=$(sed -n 's/^ *manifest *//p' <<<"$out" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["image_layout"])')
[ "$(dirname "$cache")" = "$TEST_HOME/.shardnet/images" ] && [ "$(stat -c %U "$cache/index.json")" = "$TEST_USER" ] \
    || fail "the manifest's image_layout is not the user's copy in the image cache: $cache"
[ "$(ls "$TEST_HOME/.shardnet/images")" = "$(printf '%s\n' $images_before "$(basename "$cache")" | sort -u | grep .)" ] \
    || fail "the refused references left layouts in the image cache: $(ls "$TEST_HOME/.shardnet/images")"
for _ in $(seq 150); do [ -f "$WORK/seen.1.0" ] && [ -f "$WORK/seen.1.1" ] && break; sleep 0.2; done
[ -f "$WORK/seen.1.0" ] && [ -f "$WORK/seen.1.1" ] || fail "attempt 1's tasks wrote nothing: $(cat "$WORK"/reg-*.out 2>/dev/null | tail -5)"
for r in 0 1; do
    grep -qx "attempt=1 rank=$r/2 run=$run digest=$FIRST content=first" "$WORK/seen.1.$r" || fail "rank $r of attempt 1: $(cat "$WORK/seen.1.$r")"
done
fed_wait 30 'sum(1 for w in v["workers"] if w["role"] == "step" and w["health"] == "healthy") == 2' B "/v1/runs/$run" \
    || fail "the container's ranks never reported to B: $(fed_get B "/v1/runs/$run")"
ok "attempt 1 runs $FIRST from the registry (copied into $cache at submit)"

# 3. The tag moves; the registry goes away; a node dies.
skopeo copy --quiet "oci:$L:other" "docker://$REG/shardnet/busybox:train" || fail "pushing the second image"
moved=$(reg_digest) && [ "$moved" != "$FIRST" ] || fail "the registry's tag did not move: $moved"
kill "$REG_PID"; wait "$REG_PID" 2>/dev/null || true
! curl -s "http://$REG/v2/" >/dev/null || fail "the registry still answers"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 90 'any(e["kind"] == "RECOVERED" for e in v["events"])' A "/v1/runs/$run/events" \
    || fail "$run not recovered at A: B: $(fed_get B "/v1/runs/$run/events")"
placement=$(fed_get B "/v1/runs/$run/events" | /usr/bin/python3 -c '
import json, sys
print([e["cause"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"][0])')
echo "  B: $placement"
grep -qF "gamma rejected: cannot read the image's layout $cache (clusters.gamma.image_roots: $WORK/site-images)" <<<"$placement" \
    || fail "B's placement does not name gamma's reason: $placement"
grep -q "goes to broker alpha-broker" <<<"$placement" || fail "the decision did not go to A: $placement"
for _ in $(seq 150); do [ -f "$WORK/seen.2.0" ] && [ -f "$WORK/seen.2.1" ] && break; sleep 0.2; done
for r in 0 1; do
    grep -qx "attempt=2 rank=$r/2 run=$run digest=$FIRST content=first" "$WORK/seen.2.$r" \
        || fail "rank $r of attempt 2 did not run $FIRST: $(cat "$WORK/seen.2.$r" 2>&1)"
done
[ -z "$(slurm gamma squeue -h)" ] || fail "a job went to gamma: $(slurm gamma squeue -h)"
fed_wait 60 'v["state"] == "SUCCEEDED"' A "/v1/runs/$run" || fail "$run did not succeed at A: $(fed_get A "/v1/runs/$run")"
show=$(shard --broker "https://127.0.0.1:$A_PORT" --ca-file "$FED/a.crt" show "$run") || fail "shard show $run at A: $show"
grep -qx "image docker://$REG/shardnet/busybox:train pinned to $FIRST (every attempt)" <<<"$show" || fail "shard show: $show"
ok "the tag moved to $moved, the registry stopped, beta2 died: gamma rejected (its image_roots), attempt 2 on alpha ran $FIRST; SUCCEEDED"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2

# 4. A cluster that cannot run the image, found by the probe or the config.
mkdir -p "$WORK/no-oci"
probe() { SLURM_CONF=$1 "$BUILD/hwloc-probe/shardnet-probe" --host "$2"; }
probe "$SCRATCH/alpha/slurm.conf" alpha1 > "$WORK/alpha1.ready.json" || fail "probe alpha1"
/usr/bin/python3 - "$WORK/alpha1.ready.json" "$SCRATCH/alpha/oci.conf" <<'PY' || fail "the probe did not find alpha's oci.conf: $(cat "$WORK/alpha1.ready.json")"
import json, sys
c = json.load(open(sys.argv[1]))["containers"]
assert c["ready"] is True and c["oci_conf"] == sys.argv[2] and c["runtime"].endswith("/shardnet-oci-user"), c
PY
# --check, as slurmd's HealthCheckProgram runs it (no SLURM_CONF), reads
# the oci.conf the descriptor was recorded with: there, no drain; gone, it fails.
mkdir -p "$WORK/node-conf"; cp "$SCRATCH/alpha/oci.conf" "$WORK/node-conf/oci.conf"
probe "$WORK/node-conf/slurm.conf" alpha1 > "$WORK/recorded.json" || fail "probe with node-conf"
out=$(env -u SLURM_CONF "$BUILD/hwloc-probe/shardnet-probe" --check "$WORK/recorded.json") || fail "--check of a node whose runtime is there: $out"
rm "$WORK/node-conf/oci.conf"
rc=0; out=$(env -u SLURM_CONF "$BUILD/hwloc-probe/shardnet-probe" --check "$WORK/recorded.json") || rc=$?
[ $rc = 1 ] && grep -qx "shardnet-probe: containers no longer run here: no oci.conf beside $WORK/node-conf/slurm.conf" <<<"$out" \
    || fail "--check of a node whose oci.conf went: exit $rc: $out"
for n in alpha1 alpha2; do
    probe "$WORK/no-oci/slurm.conf" "$n" > "$WORK/$n.json"
    curl -sf --cacert "$FED/a.crt" -H "Authorization: Bearer $ADMIN_TOKEN" -X POST --data-binary @"$WORK/$n.json" \
        "https://127.0.0.1:$A_PORT/v1/nodes" > /dev/null || fail "publishing $n to A"
done
cap=$(fed_get B "/v1/capacity?containers=1") || fail "capacity at B"
/usr/bin/python3 - "$cap" <<'PY' || fail "capacity with containers=1: $cap"
import json, sys
rows = {(r["broker"], r["cluster"]): r for r in json.loads(sys.argv[1])["clusters"]}
a = rows[("alpha-broker", "alpha")]
assert a["status"] == "refused" and a["reason"] == "2 node(s), none with a container runtime (their probes found no usable oci.conf)", a
assert rows[("beta-broker", "beta")]["status"] == "ok", rows
PY
sed "s|^image: .*|image: oci:$L:train|" "$WORK/reg.yaml" > "$WORK/here.yaml"; chmod 644 "$WORK/here.yaml"
rc=0; out=$(shard run "$WORK/here.yaml" --cluster alpha 2>&1) || rc=$?
echo "$out" | sed 's/^/  /'
[ $rc = 4 ] && grep -q "alpha .*none with a container runtime" <<<"$out" && grep -q "nothing submitted" <<<"$out" \
    || fail "shard run --cluster alpha without a runtime there: exit $rc: $out"
[ -z "$(slurm alpha squeue -h)" ] || fail "a job was submitted on alpha: $(slurm alpha squeue -h)"
ok "alpha's nodes probed without oci.conf: capacity lists alpha refused, shard run submits nothing there; --check fails a node whose runtime went"
# A cluster with one node of each: shard run keeps the job off the one
# without a runtime (sbatch --exclude, from B's capacity rows).
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
probe "$WORK/no-oci/slurm.conf" beta2 > "$WORK/beta2.json"
curl -sf --cacert "$FED/b.crt" -H "Authorization: Bearer $ADMIN_TOKEN" -X POST --data-binary @"$WORK/beta2.json" \
    "https://127.0.0.1:$B_PORT/v1/nodes" > /dev/null || fail "publishing beta2 to B"
sed -e "s|^image: .*|image: oci:$L:train|" -e 's|^nodes: 2|nodes: 1|' "$WORK/reg.yaml" > "$WORK/one.yaml"; chmod 644 "$WORK/one.yaml"
out=$(shard run "$WORK/one.yaml" --cluster beta 2>&1) || fail "shard run one node on beta: $out"
j=$(sed -n 's/.*submitted *job \([0-9]*\) on beta.*/\1/p' <<<"$out")
[ -n "$j" ] || fail "no job id in: $out"
job=$(slurm beta scontrol show job "$j")
grep -q "ExcNodeList=beta2" <<<"$job" || fail "job $j was not kept off beta2: $(grep -o 'ExcNodeList=[^ ]*' <<<"$job")"
slurm beta scancel "$j"
ok "beta2 probed without a runtime: shard run's job $j is submitted with --exclude=beta2"
enc=$(/usr/bin/python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$L")
cap=$(fed_get B "/v1/capacity?containers=1&image_layout=$enc") || fail "capacity at B with image_layout"
/usr/bin/python3 - "$cap" "$L" "$WORK/site-images" <<'PY' || fail "capacity with image_layout: $cap"
import json, sys
rows = {(r["broker"], r["cluster"]): r for r in json.loads(sys.argv[1])["clusters"]}
g = rows[("beta-broker", "gamma")]
assert g["status"] == "refused" and g["reason"] == "cannot read the image's layout %s (clusters.gamma.image_roots: %s)" % (sys.argv[2], sys.argv[3]), g
PY
rc=0; out=$(fed_get B "/v1/capacity?image_layout=/a/../etc" 2>&1) || rc=$?
[ $rc != 0 ] || fail "a layout with '..' was taken: $out"
ok "a layout outside gamma's image_roots: gamma refused in capacity, the reason named; a '..' path refused"

# 5. A --container step on a node whose oci.conf went: Slurm 22.05 alone
# starts the task on the host, outside its image; ShardNet's task does not
# start, saying why.
(cd "$WORK" && runuser -u "$TEST_USER" -- umoci unpack --rootless --image "$L:train" "$WORK/own" >/dev/null) || fail "umoci unpack as $TEST_USER"
plugstack gamma "broker=https://127.0.0.1:$B_PORT ca_file=$FED/b.crt worker_key_file=$FED/b.worker.key heartbeat_min=1"
out=$(as_user gamma srun -N1 --shardnet=g-in --container="$WORK/own" /bin/sh -c 'cat /content' 2>&1) || fail "srun --container on gamma: $out"
[ "$out" = first ] || fail "the container step on gamma did not run in the image: $out"
mv "$SCRATCH/gamma/oci.conf" "$WORK/gamma-oci.conf"
alone=$(as_user gamma srun -N1 --container="$WORK/own" /bin/sh -c 'test -f /content && echo in-image || echo on-host' 2>&1) || true
echo "  the same step without --shardnet, Slurm alone: $alone"
rc=0; out=$(as_user gamma srun -N1 --shardnet=g-out --container="$WORK/own" /bin/sh -c 'test -f /content && echo in-image || echo on-host' 2>&1) || rc=$?
mv "$WORK/gamma-oci.conf" "$SCRATCH/gamma/oci.conf"
echo "$out" | sed 's/^/  /'
[ $rc != 0 ] && ! grep -q "on-host\|in-image" <<<"$out" &&
    grep -qF "shardnet: error: this node runs no containers (no oci.conf beside $SCRATCH/gamma/slurm.conf); the task would run outside its image: not started" <<<"$out" \
    || fail "a --shardnet container step on a node without oci.conf: exit $rc: $out"
ok "a --shardnet container step where oci.conf went is not started, the reason said (without ShardNet: $alone)"
rm -rf "$cache" "$WORK/own" "$TEST_HOME/.shardnet/bundles/${FIRST#sha256:}" "$TEST_HOME/.shardnet/bundles/.${FIRST#sha256:}.lock"
