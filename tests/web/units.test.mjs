// The dashboard's logic without a browser (node --test): the SSE parser
// and the model the timeline draws (lanes, bars, lost work, recovery
// phases) from a run's events as the broker writes them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseBlock } from "../../web/sse.js";
import { model, decisionAttempt } from "../../web/recovery.js";

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
