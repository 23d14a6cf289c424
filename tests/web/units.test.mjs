// The dashboard's logic without a browser (node --test): the SSE parser
// and the model the timeline draws (lanes, bars, lost work, recovery
// phases) from a run's events as the broker writes them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseBlock } from "../../web/sse.js";
import { model, decisionAttempt, withOnward } from "../../web/recovery.js";

test("parseBlock: id, event and data; comments and keep-alives are nothing", () => {
  assert.deepEqual(parseBlock('id: 7\nevent: FAULT\ndata: {"id":7}'), { id: "7", event: "FAULT", data: '{"id":7}' });
  assert.equal(parseBlock(": keep-alive"), null);
  assert.equal(parseBlock("data: a\ndata: b").data, "a\nb");
});

const ev = (id, time, kind, evidence = {}, cause = kind) => ({ id, time, kind, cause, evidence });
const killed = [
  ev(1, 100, "PENDING"),
  ev(2, 101, "RUNNING", { attempt: 1 }),
  ev(3, 110, "SEALED", { checkpoint: "c1", attempt: 1 }),
  ev(4, 130, "FAULT", { attempt: 1, node: "b1", last_seen: 126, last_step: 40 }),
  ev(5, 131, "PLACEMENT", { decision: "west:r/attempt-2", from_cluster: "beta", target: "alpha", new_job: 9,
    rejected: [{ cluster: "beta", reason: "no spare" }] }),
  ev(6, 131.5, "RECOVERING", { decision: "west:r/attempt-2", from_cluster: "beta", target: "alpha", new_job: 9 }),
  ev(7, 140, "ATTEMPT", { attempt: 2 }),
  ev(8, 142, "RECOVERED", { attempt: 2, nodes: 2 }),
];

test("a run killed on beta and resumed on alpha: two lanes, two bars, the lost work, four phases", () => {
  const m = model(killed, { broker: "west", now: 150, state: "RUNNING" });
  assert.deepEqual(m.lanes, ["west / beta", "west / alpha"]);
  assert.deepEqual(m.bars.map((b) => [b.attempt, b.lane, b.start, b.end]), [[1, "west / beta", 100, 130], [2, "west / alpha", 131, 150]]);
  assert.deepEqual(m.lost.map((l) => [l.from, l.to, l.lane]), [[110, 126, "west / beta"]]);
  assert.equal(m.seals.length, 1);
  assert.deepEqual(m.recoveries[0].phases.map((p) => p.seconds), [4, 1, 9, 2]);
});

test("the attempts' clusters from the broker win; a recovery not finished says so", () => {
  const m = model(killed.slice(0, 5), { attempts: [{ attempt: 1, cluster: "gamma" }], broker: "", now: 135 });
  assert.equal(m.lanes[0], "gamma");
  assert.deepEqual(m.recoveries[0].phases.map((p) => p.seconds), [4, 1, null, null]);
  assert.equal(decisionAttempt(killed[4]), 2);
});

test("nothing sealed: the lost work runs from the start", () => {
  const m = model(killed.filter((e) => e.kind !== "SEALED"), { broker: "w", now: 150 });
  assert.equal(m.lost[0].from, 100);
});

test("a run moved to a peer broker: its story there joins this one, its lane is the peer's, the recovery ends there", () => {
  // This broker (east) saw the FAULT and handed attempt 2 to broker west.
  const here = [
    ev(1, 100, "PENDING"),
    ev(2, 101, "RUNNING", { attempt: 1 }),
    ev(3, 110, "SEALED", { checkpoint: "c1", attempt: 1 }),
    ev(4, 130, "FAULT", { attempt: 1, node: "b1", last_seen: 126 }),
    ev(5, 131, "PLACEMENT", { decision: "east:r/attempt-2", from_cluster: "beta", peer: "west", rejected: [] }),
    ev(6, 133, "MOVED", { decision: "east:r/attempt-2", peer: "west", cluster: "gamma", job: 55 }),
  ];
  // Alone, it reads as a recovery that never ended.
  const alone = model(here, { attempts: [{ attempt: 1, cluster: "beta" }], broker: "east", now: 160, state: "MOVED" });
  assert.equal(alone.recoveries[0].recovered, null);
  const onward = { broker: "west", attempt: 2, job: 55, status: "ok",
    run: { id: "r", state: "RUNNING", attempt: 2, cluster: "gamma", job: 55, attempts: [{ attempt: 2, cluster: "gamma", job: 55, world: 2 }] },
    events: [ev(1, 132, "RECEIVED", {}, "decision east:r/attempt-2 from broker east"), ev(2, 140, "ATTEMPT", { attempt: 2 }),
      ev(3, 143, "RECOVERED", { attempt: 2, nodes: 2 })] };
  const story = withOnward(here, [{ attempt: 1, cluster: "beta" }], onward);
  assert.deepEqual(story.events.map((e) => `${e.broker ?? "east"}:${e.kind}`),
    ["east:PENDING", "east:RUNNING", "east:SEALED", "east:FAULT", "east:PLACEMENT", "west:RECEIVED", "east:MOVED", "west:ATTEMPT", "west:RECOVERED"]);
  const m = model(story.events, { attempts: story.attempts, broker: "east", now: 160, state: onward.run.state });
  assert.deepEqual(m.lanes, ["east / beta", "west / gamma"]);
  assert.deepEqual(m.bars.map((b) => [b.attempt, b.lane, b.start, b.end]), [[1, "east / beta", 100, 130], [2, "west / gamma", 131, 160]]);
  assert.deepEqual(m.lost.map((l) => [l.from, l.to]), [[110, 126]]);
  assert.deepEqual(m.recoveries[0].phases.map((p) => p.seconds), [4, 1, 9, 3]);
  // No story (the peer never answered): nothing joins.
  assert.equal(withOnward(here, [], { broker: "west", status: "unreachable" }).events, here);
});

test("Slurm's own requeue pauses the attempt on the timeline until RESUMED; an open pause runs to now", () => {
  const evs = [ev(1, 100, "RUNNING", { attempt: 1 }), ev(2, 120, "REQUEUED", { attempt: 1, job: 7, restarts: 1 }),
    ev(3, 245, "RESUMED", { attempt: 1, job: 7, nodes: "a1,a2" })];
  const m = model(evs, { broker: "w", now: 300, state: "RUNNING" });
  assert.deepEqual(m.pauses.map((p) => [p.attempt, p.from, p.to]), [[1, 120, 245]]);
  assert.equal(m.bars.length, 1);   // the same attempt: one bar, paused within it
  const waiting = model(evs.slice(0, 2), { broker: "w", now: 200, state: "RUNNING" });
  assert.deepEqual(waiting.pauses.map((p) => [p.from, p.to, p.open]), [[120, 200, true]]);
  assert.deepEqual(model(killed, { broker: "w", now: 150 }).pauses, []);
});

// Receipts, checked as the run page checks them (web/verify.js).
import { hex, unhex, b64decode, canonical, pae, leafHash, nodeHash, verifyInclusion, sha256, envelopeBytes,
  importKeys, checkHead, verifyReceipts, attests, checkKeyValidity } from "../../web/verify.js";
import { policyView, fmtDuration } from "../../web/policy.js";

test("RFC 9162 inclusion: Certificate Transparency's reference tree (tests/unit/test_merkle.cpp)", async () => {
  const data = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"].map(unhex);
  const leaves = await Promise.all(data.map(leafHash));
  const root = unhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328");
  const p0 = ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"].map(unhex);
  const p5 = ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"].map(unhex);
  assert.equal(await verifyInclusion(0, 8, leaves[0], p0, root), true);
  assert.equal(await verifyInclusion(5, 8, leaves[5], p5, root), true);
  assert.equal(await verifyInclusion(4, 8, leaves[5], p5, root), false, "another index");
  assert.equal(await verifyInclusion(5, 8, leaves[4], p5, root), false, "another leaf");
  assert.equal(await verifyInclusion(5, 8, leaves[5], p5.slice(0, 2), root), false, "a shorter path");
  assert.equal(await verifyInclusion(8, 8, leaves[5], p5, root), false, "an index past the tree");
  // Size 3 (not a power of two): leaf 2's path is the root of leaves 0-1.
  const r3 = await nodeHash(await nodeHash(leaves[0], leaves[1]), leaves[2]);
  assert.equal(hex(r3), "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77");
  assert.equal(await verifyInclusion(2, 3, leaves[2], [await nodeHash(leaves[0], leaves[1])], r3), true);
  assert.equal(hex(await sha256(new Uint8Array())), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
});

test("DSSE's PAE, base64 both ways, the envelope's bytes", () => {
  assert.equal(new TextDecoder().decode(pae("http://example.com/HelloWorld", new TextEncoder().encode("hello world"))),
    "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  assert.deepEqual(b64decode("-_8="), Uint8Array.of(0xfb, 0xff));
  assert.deepEqual(b64decode("+/8"), Uint8Array.of(0xfb, 0xff));
  assert.equal(b64decode("a b"), null);
  assert.equal(canonical({ signatures: [{ sig: "s", keyid: "k" }], payloadType: "t", payload: "p" }),
    '{"payload":"p","payloadType":"t","signatures":[{"keyid":"k","sig":"s"}]}');
});

// A run of three receipts signed with a key made here, in a log of three.
async function signedRun() {
  const subtle = globalThis.crypto.subtle;
  const pair = await subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const der = new Uint8Array(await subtle.exportKey("spki", pair.publicKey));
  const pem = `-----BEGIN PUBLIC KEY-----\n${Buffer.from(der).toString("base64")}\n-----END PUBLIC KEY-----\n`;
  const keyid = hex(await sha256(der));
  const enc = new TextEncoder();
  const sign = async (type, body) => {
    const payload = enc.encode(JSON.stringify(body));
    const sig = new Uint8Array(await subtle.sign({ name: "Ed25519" }, pair.privateKey, pae(type, payload)));
    return { payload: Buffer.from(payload).toString("base64"), payloadType: type, signatures: [{ keyid, sig: Buffer.from(sig).toString("base64") }] };
  };
  const kinds = [["attempt-started", { cluster: "beta", job: 7, nodes: [{ name: "b1" }] }], ["checkpoint-sealed", { checkpoint: "c1", parent: null, ranks: 1, files: { merkle_root: "ab".repeat(32), count: 3, bytes: 99 } }],
    ["run-ended", { state: "SUCCEEDED" }]];
  const listed = [];
  let previous = null;
  for (const [i, [kind, body]] of kinds.entries()) {
    const envelope = await sign("application/vnd.in-toto+json", { _type: "https://in-toto.io/Statement/v1",
      subject: [{ name: `shardnet:r1/attempt/1/${kind}`, digest: { sha256: "00" } }], predicateType: "https://shardnet.dev/receipt/v1",
      predicate: { kind, run: "r1", attempt: 1, broker: "west", time: "2025-03-01T12:00:00Z", seq: i + 1, previous, body } });
    previous = hex(await sha256(envelopeBytes(envelope)));
    listed.push({ seq: i + 1, kind, attempt: 1, time: "2025-03-01T12:00:00Z", digest: previous, log_index: i, envelope });
  }
  const leaves = await Promise.all(listed.map((r) => leafHash(envelopeBytes(r.envelope))));
  const l01 = await nodeHash(leaves[0], leaves[1]), root = await nodeHash(l01, leaves[2]);
  const paths = [[leaves[1], leaves[2]], [leaves[0], leaves[2]], [l01]].map((p) => p.map(hex));
  const head = { tree_size: 3, root_hash: hex(root), head: await sign("application/vnd.shardnet.treehead+json", { tree_size: 3, root_hash: hex(root), timestamp: "t" }) };
  return { listed, keys: [{ keyid, pem, status: "current" }], head, proof: async (i) => ({ path: paths[i] }) };
}

test("a run's receipts: signature, Statement, chain and log all verified; an altered payload fails, naming the checks", async () => {
  const r = await signedRun();
  const keyring = await importKeys(r.keys);
  assert.equal(keyring.ed25519, true);
  assert.deepEqual(keyring.problems, []);
  const head = await checkHead(r.head, keyring);
  assert.equal(head.ok, true, head.text);
  const good = await verifyReceipts("r1", r.listed, keyring, head, r.proof);
  assert.deepEqual(good.map((v) => v.state), ["verified", "verified", "verified"]);
  assert.deepEqual(good[1].checks.map((c) => [c.name, c.ok]), [["signature", true], ["statement", true], ["chain", true], ["log", true]]);
  assert.equal(attests(good[0]), "attempt 1 started on beta, job 7, nodes b1");
  assert.equal(attests(good[2]), "run ended SUCCEEDED");
  // A seal commits its files as one Merkle root: their count from body.files, not the one subject.
  assert.equal(attests(good[1]), `checkpoint c1 sealed (parent none), 3 files with SHA-256 under Merkle root ${"ab".repeat(8)}…, 1 rank`);
  // seq 2's payload altered (as tests/web/t-dashboard.sh alters one in the database).
  const bad = structuredClone(r.listed);
  const st = JSON.parse(Buffer.from(bad[1].envelope.payload, "base64").toString());
  st.predicate.body.ranks = 2;
  bad[1].envelope.payload = Buffer.from(JSON.stringify(st)).toString("base64");
  const v = await verifyReceipts("r1", bad, keyring, head, r.proof);
  assert.deepEqual(v.map((x) => x.state), ["verified", "failed", "failed"]);
  const failedChecks = (x) => x.checks.filter((c) => c.ok === false).map((c) => c.name);
  assert.deepEqual(failedChecks(v[1]), ["signature", "digest", "log"]);
  assert.match(v[1].checks[0].text, /^bad signature by key [0-9a-f]{64} \(payload or signature altered\)$/);
  assert.deepEqual(failedChecks(v[2]), ["chain"]);
  assert.match(v[2].checks[2].text, /^missing predecessor: previous is [0-9a-f]{64}, but receipt seq 2 here has digest/);
  // Only what is new is checked: a known prefix is kept as it was.
  const more = await verifyReceipts("r1", r.listed, keyring, head, async () => { throw new Error("asked again"); }, good.slice(0, 3));
  assert.equal(more.length, 3);
  const tail = await verifyReceipts("r1", r.listed, keyring, head, r.proof, good.slice(0, 2));
  assert.deepEqual(tail.map((x) => x.state), ["verified", "verified", "verified"]);
  assert.equal(tail[0], good[0]);
  // A dropped receipt, a wrong run, an unknown key; a browser without Ed25519.
  const gap = await verifyReceipts("r1", [r.listed[0], r.listed[2]], keyring, null, r.proof);
  assert.equal(gap[1].checks.find((c) => c.name === "chain").text, "missing predecessor: no receipt with seq 2");
  assert.equal((await verifyReceipts("r2", r.listed.slice(0, 1), keyring, null, r.proof))[0].checks[1].ok, false);
  const other = await verifyReceipts("r1", r.listed.slice(0, 1), { keys: new Map(), ed25519: true, problems: [] }, null, r.proof);
  assert.match(other[0].checks[0].text, /^signed by unknown key /);
  const noEd = await verifyReceipts("r1", r.listed, { keys: new Map(), ed25519: false, problems: [] }, null, r.proof);
  assert.deepEqual(noEd.map((x) => [x.state, x.checks[0].ok]), [["verified", null], ["verified", null], ["verified", null]]);
  // A listed keyid that is not the key's hash is said, never trusted.
  assert.match((await importKeys([{ ...r.keys[0], keyid: "ab".repeat(32) }])).problems[0], /^key listed as abab.* hashes to /);
});

test("a retired key signs nothing after its valid_until: later receipts fail, as in `shard verify`", async () => {
  const r = await signedRun();   // every receipt at 2025-03-01T12:00:00Z
  const retired = (until) => importKeys([{ ...r.keys[0], status: "retired", valid_until: until }]);
  const before = await verifyReceipts("r1", r.listed, await retired("2025-03-01T12:00:00.000Z"), null, r.proof);
  assert.deepEqual(before.map((v) => v.state), ["verified", "verified", "verified"]);
  assert.deepEqual(before[0].checks.find((c) => c.name === "key"), { name: "key", ok: true, text: "signed before its key's valid_until 2025-03-01T12:00:00.000Z" });
  const after = await verifyReceipts("r1", r.listed, await retired("2025-03-01T11:59:59.999Z"), null, r.proof);
  assert.deepEqual(after.map((v) => v.state), ["failed", "failed", "failed"]);
  assert.match(after[0].checks.find((c) => c.name === "key").text,
    /^signed by key [0-9a-f]{64} at 2025-03-01T12:00:00Z, after the key's valid_until 2025-03-01T11:59:59.999Z \(a retired key signs nothing later\)$/);
  // A current key (valid_until null) has no such check; one that is no time refuses.
  assert.equal((await verifyReceipts("r1", r.listed, await importKeys(r.keys), null, r.proof))[0].checks.some((c) => c.name === "key"), false);
  const keyring = await retired("yesterday");
  assert.equal(checkKeyValidity(r.listed[0].envelope, "2025-03-01T12:00:00Z", keyring).ok, false);
});

test("the checkpoint policy in the words of `shard ckpt policy` (doc/checkpoint-policy.md's example)", () => {
  const v = policyView({ run: "ck-auto", auto: true, state: "in_force", version: 2, every_steps: 6,
    computed: { every_steps: 5, seconds: 1.0, daly_seconds: 0.86, young_seconds: 0.86, optimum_seconds: 0.86, expected_waste: 0.09, mtbf_seconds: 65.4 },
    inputs: { write_seconds: { value: 0.01, samples: 2, source: "measured" }, step_seconds: { value: 0.2, samples: 5, source: "measured" },
      mtbf_seconds: { value: 65.4, node_value: 65.4, nodes: 1, node_hours_observed: 0.00447, interruptions: 2, prior_node_hours: 0.05, samples: 2, source: "measured+prior" },
      restart_seconds: { value: 5.32, samples: 2, source: "measured", tiers: [{ tier: "same_cluster", recoveries: 1, detect: 4.06, place: 0.03, start: 0.81, restore: 1.0, total: 5.91 }] } } });
  assert.equal(v.headline, "checkpoint every 6 steps (policy v2, Daly 2006)");
  assert.deepEqual(v.computed, ["now computed: every 5 steps = 1.00 s of compute; Daly 0.86 s, Young 1974 0.86 s, complete model's optimum 0.86 s",
    "expected waste 9.0% of wall time (writes, lost work, restarts)"]);
  assert.deepEqual(v.inputs.map((i) => [i.name, i.value, i.source]), [
    ["write time (delta)", "0.01 s", "measured, 2 sealed checkpoints (median)"],
    ["step time", "0.20 s", "measured, 5 steps"],
    ["mean time to interruption (M)", "65.4 s", "a node's 65.4 s / 1 node: 2 interruptions in 0.00447 node-hours observed + prior 0.05 h (measured+prior)"],
    ["restart (R)", "5.32 s", "measured, 2 recoveries (median)"]]);
  assert.equal(v.tiers[0].line, "same_cluster 1 recovery: detect 4.06 s, place 0.03 s, start 0.81 s, first step 1.00 s = 5.91 s");
  assert.equal(policyView({ state: "in_force", version: 2, every_steps: 6 }, { version: 2, every_steps: 6, seconds: 1.2 }).headline,
    "checkpoint every 6 steps = 1.20 s of compute (policy v2, Daly 2006)");
  assert.match(policyView({ state: "measuring", version: 0, waiting_for: "two steps" }).headline, /^no interval yet .*waiting for two steps$/);
  assert.deepEqual([fmtDuration(24 * 3600), fmtDuration(116.7 * 60), fmtDuration(300)], ["24.0 h", "117 min", "5.00 min"]);
});
