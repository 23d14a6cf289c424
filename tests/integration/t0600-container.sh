#!/bin/bash
# Issue 32: every attempt runs the same image, pinned by digest, through
# Slurm's own OCI support (oci.conf with crun on both clusters, the
# harness's; doc/containers.md). An OCI image layout with two images built
# from busybox (no registry): tag "train" (/content: first) and "other"
# (/content: second). A bad reference is refused by shard run, naming it,
# and nothing is submitted. A 2-node spec with image oci:LAYOUT:train runs
# in the image: each task sees ShardNet's contract (its own rank, the run,
# SHARDNET_IMAGE_DIGEST) and writes through the bind-mounted working dir.
# Mid-run the tag moves to the other image and a node dies: attempt 2, on
# the other cluster, runs the first digest (its /content says "first").
# A spec with a spare (shard launch) in the second image: its tag moves,
# the active node dies, the relaunch on the spare runs the second digest.
. "$(dirname "$0")/lib.sh"
command -v crun >/dev/null && command -v umoci >/dev/null || fail "crun and umoci are not installed (scripts/install-deps.sh installs them)"
[ -f "$SCRATCH/alpha/oci.conf" ] && [ -f "$SCRATCH/beta/oci.conf" ] || fail "the harness wrote no oci.conf"

# 0. crun's state is no user's to forge for root: the parent of the users'
# state dirs is root's, 0755 (no user makes another's dir there), and the
# RunTime* commands Slurm runs as root (Query, Kill, Delete) run the runtime
# as the job's user, so a pid a user wrote into their state reaches only
# their own processes.
[ "$(stat -c '%U %a' "$SCRATCH/oci")" = "root 755" ] || fail "the crun state parent is $(stat -c '%U %a' "$SCRATCH/oci"), not root's 755"
! runuser -u "$OTHER_USER" -- mkdir "$SCRATCH/oci/not-$OTHER_USER" 2>/dev/null || fail "$OTHER_USER made a state dir for another user"
printf '#!/bin/sh\nid -u > %s/probe.uid\n' "$WORK" > "$WORK/probe-crun.sh"; chmod 755 "$WORK/probe-crun.sh"
for key in RunTimeQuery RunTimeKill RunTimeDelete; do
    line=$(sed -n "s/^$key=\"\(.*\)\"\$/\1/p" "$SCRATCH/beta/oci.conf")
    [ -n "$line" ] || fail "no $key in oci.conf"
    # As slurmstepd runs it: /bin/sh -c, as root, the patterns filled in.
    cmd=$(sed -e "s#$SCRATCH/lib/crun-hybrid.sh#$WORK/probe-crun.sh#" -e "s/%u/$TEST_USER/g" -e 's/%n/beta1/g; s/%j/1/g; s/%s/0/g; s/%t/0/g' <<<"$line")
    rm -f "$WORK/probe.uid"
    /bin/sh -c "$cmd" >/dev/null 2>&1 || fail "$key as root: $(/bin/sh -c "$cmd" 2>&1)"
    [ "$(cat "$WORK/probe.uid")" = "$(id -u "$TEST_USER")" ] || fail "$key ran the runtime as uid $(cat "$WORK/probe.uid"), not as $TEST_USER"
done
[ "$(stat -c '%U %a' "$SCRATCH/oci/$TEST_USER")" = "$TEST_USER 700" ] || fail "$TEST_USER's state dir: $(stat -c '%U %a' "$SCRATCH/oci/$TEST_USER")"
ok "crun's state parent is root's 755; RunTimeQuery/Kill/Delete run the runtime as the job's user, in the user's 0700 state dir"

# shardnet-oci-run never starts a task without the environment the plugin
# meant it to have: an unreadable, empty or foreign env file ends it.
: > "$WORK/empty.env"
for f in "$WORK/none.env" "$WORK/empty.env"; do
    rc=0; out=$(SHARDNET_OCI_ENV=$f "$SCRATCH/lib/shardnet-oci-run" /bin/echo RAN --bundle "$WORK" id 2>&1) || rc=$?
    [ $rc = 1 ] && ! grep -q RAN <<<"$out" && grep -q "shardnet-oci-run: error: .*$f" <<<"$out" || fail "shardnet-oci-run with $f: exit $rc: $out"
done
ok "shardnet-oci-run refuses to start the runtime without the task's environment (exit 1, the reason said)"
start_federation
fed_receipts   # the attempts' receipts name the digest each rank ran
L=$WORK/images
"$HARNESS/oci-image.sh" "$L" train first >/dev/null || fail "could not build the first image"
"$HARNESS/oci-image.sh" "$L" other second >/dev/null || fail "could not build the second image"
digest_of() { /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(open(sys.argv[1]))["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == sys.argv[2]][0])' "$L/index.json" "$1"; }
FIRST=$(digest_of train); SECOND=$(digest_of other)
[ "$FIRST" != "$SECOND" ] || fail "the two images have one digest"

# 1. A bad reference: refused at submit, named, nothing submitted.
for ref in "oci:$L:nope" "oci:$WORK/no-such-layout:train" "ubuntu:22.04" "docker://reg.example/foo@bar"; do
    printf 'name: bad\ncommand: /bin/true\nimage: %s\n' "$ref" > "$WORK/bad.yaml"; chmod 644 "$WORK/bad.yaml"
    rc=0; out=$(shard run "$WORK/bad.yaml" --cluster beta 2>&1) || rc=$?
    [ $rc = 2 ] || fail "image $ref: exit $rc, expected 2: $out"
    grep -qF "$ref" <<<"$out" || fail "the error does not name $ref: $out"
    echo "  $out"
done
queued=$(slurm alpha squeue -h && slurm beta squeue -h) || fail "squeue failed: cannot tell whether a bad image reference submitted a job"
[ -z "$queued" ] || fail "a bad image reference submitted a job: $queued"
[ "$(shard runs --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')" = 0 ] || fail "a bad image reference created a run"
printf 'name: bad\ncommand: /bin/true\nimage: oci:%s:train\ntasks_per_node: 2\n' "$L" > "$WORK/bad.yaml"
rc=0; out=$(shard run "$WORK/bad.yaml" --cluster beta 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "one task per node in a container step" <<<"$out" || fail "tasks_per_node 2 with an image: exit $rc: $out"
ok "bad image references (no such tag, no layout, no transport) and 2 tasks per node refused by shard run, named, nothing submitted"

# 2. The run, in the image. The task is busybox's sh, in the container.
cat > "$WORK/task.sh" <<'SH'
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK/$SHARDNET_WORLD_SIZE procid=$SLURM_PROCID run=$SHARDNET_RUN digest=$SHARDNET_IMAGE_DIGEST content=$(cat /content) pwd=$(pwd) uid=$(id -u)" \
    > "seen.$SHARDNET_ATTEMPT.$SHARDNET_RANK"
# What the Python library reports (shardnet.environment), by hand and, as
# it does, whole at once: busybox has no python.
printf '{"image_digest": "%s"}\n' "$SHARDNET_IMAGE_DIGEST" > "$SHARDNET_PROGRESS.env.tmp" && mv "$SHARDNET_PROGRESS.env.tmp" "$SHARDNET_PROGRESS.env"
# The checkpoint dir, bind-mounted; the image's own environment; the shared
# rootfs read-only, /tmp the task's own.
echo "$SHARDNET_RANK" > "$SHARDNET_CKPT_DIR/from-container.$SHARDNET_ATTEMPT.$SHARDNET_RANK"
{ echo "ckpt=$SHARDNET_CKPT_DIR image_env=$IMAGE_ONLY"
  touch /written-by-a-task 2>/dev/null && echo root=rw || echo root=ro
  echo x > "/tmp/scratch.$SHARDNET_RANK" && echo tmp=rw; } > "fs.$SHARDNET_ATTEMPT.$SHARDNET_RANK"
n=600; [ "$SHARDNET_ATTEMPT" -gt 1 ] && n=6
for s in $(seq 1 $n); do echo "$s" > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 644 "$WORK/task.sh"
cat > "$WORK/img.yaml" <<YAML
name: img
command: /bin/sh $WORK/task.sh
nodes: 2
heartbeat: 1
requeue: federated
image: oci:$L:train
YAML
chmod 644 "$WORK/img.yaml"
out=$(shard run "$WORK/img.yaml" --cluster beta) || fail "shard run img: $out"
echo "$out" | sed 's/^/  /'
run=$(awk '$1 == "run" {print $2}' <<<"$out")
grep -q "^image .* pinned to $FIRST$" <<<"$out" || fail "shard run did not say the pinned digest $FIRST"
for _ in $(seq 150); do [ -f "$WORK/seen.1.0" ] && [ -f "$WORK/seen.1.1" ] && break; sleep 0.2; done
[ -f "$WORK/seen.1.0" ] && [ -f "$WORK/seen.1.1" ] || fail "attempt 1's tasks wrote nothing: $(cat "$WORK"/img-*.out 2>/dev/null | tail -5)"
cat "$WORK"/seen.1.* | sed 's/^/  /'
for r in 0 1; do
    grep -qx "attempt=1 rank=$r/2 procid=$r run=$run digest=$FIRST content=first pwd=$WORK uid=0" "$WORK/seen.1.$r" \
        || fail "rank $r of attempt 1 did not see its contract in the image: $(cat "$WORK/seen.1.$r")"
done
[ "$(stat -c %U "$WORK/seen.1.0")" = "$TEST_USER" ] || fail "the container's files are not the job user's"
for r in 0 1; do
    fs=$(cat "$WORK/fs.1.$r"); ckpt=$(sed -n '1s/^ckpt=\([^ ]*\) .*/\1/p' <<<"$fs")
    echo "  rank $r: $(tr '\n' ' ' <<<"$fs")"
    [ -n "$ckpt" ] && [ "$(cat "$ckpt/from-container.1.$r" 2>/dev/null)" = "$r" ] || fail "rank $r's write into SHARDNET_CKPT_DIR ($ckpt) is not on the host"
    [ "$(stat -c %U "$ckpt/from-container.1.$r")" = "$TEST_USER" ] || fail "the checkpoint written in the container is not the job user's"
    grep -qx "ckpt=$ckpt image_env=first" <<<"$fs" || fail "rank $r lost the image's own environment (IMAGE_ONLY): $fs"
    grep -qx "root=ro" <<<"$fs" && grep -qx "tmp=rw" <<<"$fs" || fail "rank $r: the rootfs is not read-only or /tmp not writable: $fs"
done
bundle_root=$TEST_HOME/.shardnet/bundles/${FIRST#sha256:}/rootfs
[ -d "$bundle_root" ] || fail "no bundle at $bundle_root"
[ ! -e "$bundle_root/written-by-a-task" ] && [ ! -e "$bundle_root/tmp/scratch.0" ] || fail "a task wrote into the shared rootfs $bundle_root"
fed_wait 30 'sum(1 for w in v["workers"] if w["role"] == "step" and w["health"] == "healthy") == 2' B "/v1/runs/$run" \
    || fail "the heartbeats of the container's ranks did not reach broker B: $(fed_get B "/v1/runs/$run")"
ok "attempt 1 runs in $FIRST: each rank sees its own rank and SLURM_PROCID, the run, SHARDNET_IMAGE_DIGEST, the image's own env; its checkpoint dir and progress reach the host; the shared rootfs stays unwritten"

# 3. The tag moves; a node dies; attempt 2 runs the first digest.
umoci tag --image "$L:train" first || fail "umoci tag"   # the first image keeps a name for step 4
umoci tag --image "$L:other" train && chmod -R a+rX "$L" || fail "umoci tag"   # umoci writes index.json 0600
[ "$(digest_of train)" = "$SECOND" ] || fail "the tag did not move"
victim=beta2
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
fed_wait 90 'any(e["kind"] == "RECOVERED" for e in v["events"])' A "/v1/runs/$run/events" \
    || fail "$run not recovered at A: B: $(fed_get B "/v1/runs/$run/events")"
for _ in $(seq 150); do [ -f "$WORK/seen.2.0" ] && [ -f "$WORK/seen.2.1" ] && break; sleep 0.2; done
[ -f "$WORK/seen.2.0" ] && [ -f "$WORK/seen.2.1" ] || fail "attempt 2's tasks wrote nothing: $(tail -5 "$WORK"/img-*.out)"
cat "$WORK"/seen.2.* | sed 's/^/  /'
for r in 0 1; do
    grep -qx "attempt=2 rank=$r/2 procid=$r run=$run digest=$FIRST content=first pwd=$WORK uid=0" "$WORK/seen.2.$r" \
        || fail "rank $r of attempt 2 did not run $FIRST: $(cat "$WORK/seen.2.$r")"
done
fed_wait 60 'v["state"] == "SUCCEEDED"' A "/v1/runs/$run" || fail "$run did not succeed at A: $(fed_get A "/v1/runs/$run")"
show=$(shard --broker "https://127.0.0.1:$A_PORT" --ca-file "$FED/a.crt" show "$run") || fail "shard show $run at A: $show"
echo "$show" | sed 's/^/  /'
grep -qx "image oci:$L:train pinned to $FIRST (every attempt)" <<<"$show" || fail "shard show does not say the pinned digest"
for b in B A; do
    digests=$(fed_get "$b" "/v1/runs/$run/receipts" | /usr/bin/python3 -c '
import base64, json, sys
for r in json.load(sys.stdin)["receipts"]:
    p = json.loads(base64.b64decode(r["envelope"]["payload"]))["predicate"]
    if p["kind"] == "attempt-started":
        print("attempt %d: %s" % (p["attempt"], " ".join("%s:%s" % (e.get("ranks"), e.get("image_digest")) for e in p["body"].get("environment", []))))')
    echo "  receipts at $b: $digests"
    want="attempt 1: [0, 1]:$FIRST"; [ "$b" = A ] && want="attempt 2: [0, 1]:$FIRST"
    grep -qxF "$want" <<<"$digests" || fail "broker $b's attempt receipt does not name $FIRST for both ranks: $digests"
done
ok "the tag moved to $SECOND and $victim died: attempt 2 on alpha ran $FIRST (content 'first'); the run SUCCEEDED; shard show and both attempts' receipts say the digest"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done

# 4. Tier 0: shard launch relaunches on the spare, in the same job, in the same image.
cat > "$WORK/spare.sh" <<'SH'
echo "restart=$SHARDNET_RESTART node=$SLURMD_NODENAME digest=$SHARDNET_IMAGE_DIGEST content=$(cat /content)" > "spare.$SHARDNET_RESTART"
n=600; [ "$SHARDNET_RESTART" -gt 0 ] && n=4
for s in $(seq 1 $n); do echo "$s" > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 644 "$WORK/spare.sh"
cat > "$WORK/spare.yaml" <<YAML
name: spare
command: /bin/sh $WORK/spare.sh
nodes: 1
spares: 1
heartbeat: 1
requeue: federated
image: oci:$L:other
YAML
chmod 644 "$WORK/spare.yaml"
out=$(shard run "$WORK/spare.yaml" --cluster beta) || fail "shard run spare: $out"
run=$(awk '$1 == "run" {print $2}' <<<"$out")
grep -q "^image .* pinned to $SECOND$" <<<"$out" || fail "shard run did not pin $SECOND: $out"
for _ in $(seq 150); do [ -f "$WORK/spare.0" ] && break; sleep 0.2; done
[ -f "$WORK/spare.0" ] || fail "the spare run's first launch wrote nothing: $(tail -5 "$WORK"/spare-*.out)"
active=$(sed -n 's/^restart=0 node=\([a-z0-9]*\) .*/\1/p' "$WORK/spare.0")
grep -qx "restart=0 node=$active digest=$SECOND content=second" "$WORK/spare.0" || fail "the first launch: $(cat "$WORK/spare.0")"
fed_wait 30 'any(w["role"] == "step" and w["health"] == "healthy" for w in v["workers"])' B "/v1/runs/$run" || fail "no heartbeat of the spare run"
umoci tag --image "$L:first" other && chmod -R a+rX "$L" || fail "umoci tag"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$active"
for _ in $(seq 300); do [ -f "$WORK/spare.1" ] && break; sleep 0.2; done
[ -f "$WORK/spare.1" ] || fail "no relaunch on the spare: $(grep 'shard launch' "$WORK"/spare-*.out)"
sed 's/^/  /' "$WORK/spare.0" "$WORK/spare.1"
grep -qx "restart=1 node=[a-z0-9]* digest=$SECOND content=second" "$WORK/spare.1" || fail "the relaunch did not run $SECOND: $(cat "$WORK/spare.1")"
! grep -q "node=$active " "$WORK/spare.1" || fail "the relaunch ran on the dead node"
fed_wait 60 'v["state"] == "SUCCEEDED" and v["attempt"] == 1' B "/v1/runs/$run" || fail "the spare run did not succeed in attempt 1: $(fed_get B "/v1/runs/$run")"
ok "a spare run in $SECOND: its tag moved, $active died, shard launch relaunched it on the spare in the same job and image"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$active"
for _ in $(seq 150); do slurm beta sinfo -h -n "$active" -o %T | grep -qx idle && break; sleep 0.2; done

# 5. A user's own bundle (umoci unpack --rootless): srun --container and
# sbatch --container with --shardnet get the contract, and the digest
# umoci recorded as SHARDNET_IMAGE_DIGEST.
(cd "$WORK" && runuser -u "$TEST_USER" -- umoci unpack --rootless --image "$L:first" "$WORK/own" >/dev/null) || fail "umoci unpack as $TEST_USER"
out=$(as_user beta srun -N1 --shardnet=own-step --container="$WORK/own" /bin/sh -c 'echo "run=$SHARDNET_RUN rank=$SHARDNET_RANK digest=$SHARDNET_IMAGE_DIGEST content=$(cat /content)"' 2>&1) \
    || fail "srun --container: $out"
echo "  $out"
grep -qx "run=own-step rank=0 digest=$FIRST content=first" <<<"$out" || fail "srun --container of the user's bundle: $out"
j=$(as_user beta sbatch --parsable -N1 --shardnet=own-batch --container="$WORK/own" -o "$WORK/own-batch.out" \
    --wrap 'echo "run=$SHARDNET_RUN attempt=$SHARDNET_ATTEMPT digest=$SHARDNET_IMAGE_DIGEST content=$(cat /content)"')
wait_job beta "$j" 60
sed 's/^/  /' "$WORK/own-batch.out"
grep -qx "run=own-batch attempt=1 digest=$FIRST content=first" "$WORK/own-batch.out" || fail "sbatch --container: $(cat "$WORK/own-batch.out")"
ok "the user's own bundle: srun --container and sbatch --container see the contract and the digest umoci recorded"
# A cancelled container step ends (the container's pid 1 ignores SIGTERM;
# shardnet-oci-run kills it): no orphaned runtime holds the step, no node is
# drained for "Kill task failed".
printf 'while true; do echo x > "%s/cancel.seen"; sleep 0.5; done\n' "$WORK" > "$WORK/cancel.sh"; chmod 644 "$WORK/cancel.sh"
j=$(as_user beta sbatch --parsable -N1 --shardnet=own-cancel -o /dev/null --wrap "srun --container=$WORK/own /bin/sh $WORK/cancel.sh")
for _ in $(seq 100); do [ -f "$WORK/cancel.seen" ] && break; sleep 0.2; done
[ -f "$WORK/cancel.seen" ] || fail "the container job to cancel never ran"
slurm beta scancel "$j"
for _ in $(seq 40); do q=$(slurm beta squeue -h -j "$j" 2>/dev/null) || break; [ -z "$q" ] && break; sleep 0.5; done
[ -z "$q" ] || fail "the cancelled container job $j has not ended after 20 s: $q"
! pgrep -f "crun.*\.$j\.0\.0\$" >/dev/null || fail "job $j's runtime outlived its step"
slurm beta sinfo -h -o '%T' | grep -qi drain && fail "a node was drained: $(slurm beta sinfo -h -R)"
ok "a cancelled container step ends within seconds, its runtime with it; no node drained"
# A container task whose environment cannot reach it (here: over the
# plugin's 768 KiB) is not started: it fails, saying why.
big=$(head -c 120000 /dev/zero | tr '\0' x)
rc=0; out=$(as_user beta env B1="$big" B2="$big" B3="$big" B4="$big" B5="$big" B6="$big" B7="$big" \
    srun -N1 --shardnet=own-big --container="$WORK/own" /bin/sh -c 'echo STARTED' 2>&1) || rc=$?
[ $rc != 0 ] && ! grep -q STARTED <<<"$out" && grep -q "shardnet: error: the task's environment for its container could not be written" <<<"$out" \
    || fail "a container task without its environment: exit $rc: $(tail -c 600 <<<"$out")"
ok "a container task whose environment could not be written fails, saying why"
# The bundles this test unpacked (a digest per image build) leave the test user's cache.
rm -rf "$TEST_HOME/.shardnet/bundles/${FIRST#sha256:}" "$TEST_HOME/.shardnet/bundles/${SECOND#sha256:}" \
    "$TEST_HOME/.shardnet/bundles/.${FIRST#sha256:}.lock" "$TEST_HOME/.shardnet/bundles/.${SECOND#sha256:}.lock"
