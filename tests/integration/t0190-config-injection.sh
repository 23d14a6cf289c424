#!/bin/bash
# The agent's config cannot be injected from the job's environment. Node
# lists and the cluster name holding a newline and a url= line of their own
# (pointing at a second receiver) never add a line to it: heartbeats, and
# the bearer token with them, reach the configured receiver only, under the
# node's real name. And the agent itself refuses a key given twice.
. "$(dirname "$0")/lib.sh"
start_receiver refuse; EVIL_PORT=$RX_PORT; EVIL_LOG=$RX_LOG
start_receiver ok
echo "secret-token-789" > "$WORK/token"; chmod 600 "$WORK/token"
plugstack alpha broker=http://127.0.0.1:$RX_PORT token_file=$WORK/token heartbeat_min=1
printf 'alpha1\nurl=http://127.0.0.1:%s\n' "$EVIL_PORT" > "$WORK/evil"; chmod 644 "$WORK/evil"

# Set inside the batch script, before srun: the step's environment.
cat > "$WORK/inject.sh" <<SH
#!/bin/bash
evil=\$(printf '%s\nurl=http://127.0.0.1:%s' alpha1 $EVIL_PORT)
export SLURM_STEP_NODELIST="\$evil" SLURM_JOB_NODELIST="\$evil" SLURM_NODELIST="\$evil" SLURM_CLUSTER_NAME="\$evil"
cat > step.sh <<'STEP'
#!/bin/bash
# What slurmstepd (and the plugin) had as the step's environment.
for v in SLURM_JOB_NODELIST SLURM_NODELIST SLURM_CLUSTER_NAME; do case "\${!v}" in *url=*) echo "injected \$v";; esac; done
for i in 1 2 3 4; do echo \$i > "\$SHARDNET_PROGRESS"; sleep 0.5; done
echo step-ran
STEP
chmod 755 step.sh
srun -N1 -n1 --shardnet=inj-step --shardnet-heartbeat=1 ./step.sh
# (Slurm 22.05's srun sets SLURM_STEP_NODELIST itself, even over --export.)
srun -N1 -n1 --export="ALL,SLURM_STEP_NODELIST=\$evil" --shardnet=inj-step --shardnet-heartbeat=1 ./step.sh
SH
chmod 755 "$WORK/inject.sh"
evil=$(cat "$WORK/evil")
# And given to sbatch: the batch step's environment.
j=$(as_user alpha env SLURM_JOB_NODELIST="$evil" SLURM_NODELIST="$evil" SLURM_CLUSTER_NAME="$evil" \
    sbatch --parsable -N1 -o "$WORK/inj.out" --export=ALL --shardnet=inj-batch --shardnet-heartbeat=1 "$WORK/inject.sh")
wait_job alpha "$j"
slurm alpha scontrol show job "$j" | grep -q 'ExitCode=0:0' || fail "job $j: $(job_state alpha "$j"): $(cat "$WORK/inj.out")"
[ "$(grep -cx step-ran "$WORK/inj.out")" = 2 ] || fail "the steps did not run: $(cat "$WORK/inj.out")"
grep -qx "injected SLURM_NODELIST" "$WORK/inj.out" || fail "the steps' environment lacks the injected value: $(cat "$WORK/inj.out")"
ok "the steps' environment carried it: $(grep '^injected' "$WORK/inj.out" | sort -u | tr '\n' ' ')"
sleep 1.5
[ -s "$EVIL_LOG" ] && fail "the second receiver got requests: $(head -c 600 "$EVIL_LOG")"
ok "the second receiver (port $EVIL_PORT) got nothing"
hb_bodies > "$WORK/hb.jsonl"
/usr/bin/python3 - "$WORK/hb.jsonl" "$j" <<'PY'
import json, sys
hbs = [json.loads(l) for l in open(sys.argv[1])]
job = int(sys.argv[2])
assert hbs, "no heartbeats at the configured receiver"
assert all(h["_auth"] == "Bearer secret-token-789" for h in hbs), "token"
steps = {(h["job"], h["step"]) for h in hbs}
assert {(job, "batch"), (job, "0"), (job, "1")} <= steps, f"heartbeats from {steps}"
assert {h["node"] for h in hbs} == {"alpha1"}, {h["node"] for h in hbs}
assert {h["cluster"] for h in hbs} == {"alpha"}, {h["cluster"] for h in hbs}
print("heartbeats ok:", len(hbs), "from", sorted(steps))
PY
ok "heartbeats of the batch step and steps 0 and 1 reach the configured receiver, node alpha1, cluster alpha"

# The agent on its own: a second url= is refused, nothing is sent anywhere.
printf 'url=http://127.0.0.1:%s\nurl=http://127.0.0.1:%s\ntoken=t\nrun=r1\nprogress_dir=/tmp\nend\n' "$RX_PORT" "$EVIL_PORT" \
    | timeout 10 "$BUILD/spank/shardnet-agent" > /dev/null 2> "$WORK/agent.err" && fail "the agent took a second url="
grep -q "config from the plugin rejected: config key 'url' given twice" "$WORK/agent.err" || fail "agent: $(cat "$WORK/agent.err")"
[ -s "$EVIL_LOG" ] && fail "the second receiver got requests from the agent"
ok "agent: $(cat "$WORK/agent.err")"
