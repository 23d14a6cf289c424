// The dashboard on the real harness (tests/integration/t0800-dashboard.sh):
// Debian's chromium against a broker that owns clusters alpha and beta.
// Usage: node harness.mjs URL OUT_DIR ADMIN_TOKEN USER_TOKEN RUN OTHER_RUN NODES_JSON
//   RUN: the run killed on beta and resumed on alpha; OTHER_RUN: another
//   user's; NODES_JSON: {"alpha": ["alpha1", ...], "beta": [...]} as sinfo lists them.
import { check, expect, shot, fail, text } from "./browser.mjs";

const [url, out, admin, user, run, other, nodesJson] = process.argv.slice(2);
const nodes = JSON.parse(nodesJson);
await check(url, out, async ({ page, allowErrors }) => {
  const signIn = async (token) => {
    await page.goto(`${url}/#/signin`);
    await page.waitForSelector("#token");
    await page.type("#token", token);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#runs-body");
  };
  await signIn(admin);
  await shot(page, out, "runs");
  // Capacity: every node of both clusters, the counts sinfo gives.
  await page.goto(`${url}/#/capacity`);
  await page.waitForSelector("#capacity-at");
  const rows = await page.$$eval("#capacity-body tr[data-cluster]", (trs) => trs.map((tr) => [tr.dataset.cluster, Number(tr.dataset.total ?? -1)]));
  const total = {};
  for (const [c, n] of rows) total[c] = (total[c] ?? 0) + n;
  for (const [c, n] of Object.entries(nodes)) expect(total[c] === n.length, `capacity lists ${total[c]} nodes of ${c}, sinfo ${n.length}`);
  // Each row opens to its nodes by Slurm's names: together, sinfo's list.
  for (const b of await page.$$("#capacity-body tr[data-cluster] button")) await b.click();
  await page.waitForFunction((n) => document.querySelectorAll("#capacity-body li[data-node]").length >= n, { timeout: 5000 },
    Object.values(nodes).flat().length).catch(() => fail("the capacity rows did not open to their nodes"));
  const listed = await page.$$eval("#capacity-body tr[data-cluster]", (trs) => trs.map((tr) => [tr.dataset.cluster,
    [...tr.nextElementSibling.querySelectorAll("li[data-node]")].map((li) => li.dataset.node)]));
  const named = {};
  for (const [c, ns] of listed) named[c] = [...(named[c] ?? []), ...ns].sort();
  for (const [c, n] of Object.entries(nodes))
    expect(JSON.stringify(named[c]) === JSON.stringify([...n].sort()), `capacity's ${c} rows open to ${named[c]}, sinfo lists ${n}`);
  await shot(page, out, "capacity");

  // The run killed on beta and resumed on alpha.
  await page.goto(`${url}/#/runs/${run}`);
  await page.waitForSelector("#timeline");
  const lanes = await page.$$eval("#timeline .lane-label", (ls) => ls.map((l) => l.textContent));
  expect(lanes.length === 2 && lanes.some((l) => l.endsWith("beta")) && lanes.some((l) => l.endsWith("alpha")), `lanes beta and alpha: ${lanes}`);
  const kinds = await page.$$eval("#timeline .point", (ps) => ps.map((p) => p.dataset.kind));
  for (const k of ["FAULT", "PLACEMENT", "RECOVERED"]) expect(kinds.includes(k), `a ${k} point`);
  expect(/beta: not chosen: /.test(await text(page, "#placement-list")), `placement reasons: ${await text(page, "#placement-list")}`);
  expect((await page.$$("#timeline .lost")).length >= 1, "the lost work is shaded");
  const phases = await page.$$eval("#run-recoveries .phase", (ps) => ps.map((p) => p.textContent));
  console.log(`   recovery: ${phases.join(" → ")}`);
  expect(phases.length === 4 && phases.every((p) => !/not yet/.test(p)), "detect, place, start, first step each have seconds");
  await page.waitForFunction(() => /live/.test(document.querySelector("#run-live")?.textContent ?? ""), { timeout: 5000 });
  // Live: the trainer on alpha keeps sealing; the next event is on the page
  // within 1 s of the broker writing it, without a reload.
  const shown = await page.$$eval("#timeline .point, #timeline .seal", (ps) => ps.length);
  await page.waitForFunction((n) => document.querySelectorAll("#timeline .point, #timeline .seal").length > n, { timeout: 30000 }, shown)
    .catch(() => fail("no new event reached the open page in 30 s"));
  const lag = await page.evaluate(async (path, token) => {
    const evs = (await (await fetch(path, { headers: { Authorization: `Bearer ${token}` } })).json()).events;
    return Date.now() / 1000 - evs[evs.length - 1].time;
  }, `/v1/runs/${run}/events?limit=10000`, admin);
  expect(lag < 1 + 0.5, `the newest event was on the page within about 1 s of being written (read back ${lag.toFixed(2)} s after it)`);
  await shot(page, out, "run");

  // The job's user sees its run, never another user's.
  await signIn(user);
  // The table is there before its rows: wait (up to 10 s) for the user's run to be listed.
  await page.waitForFunction((r) => [...document.querySelectorAll("#runs-body tr")].some((tr) => tr.dataset.run === r), { timeout: 10000 }, run)
    .catch(() => {});
  const visible = await page.$$eval("#runs-body tr", (trs) => trs.map((tr) => tr.dataset.run));
  expect(visible.includes(run) && !visible.includes(other), `the user's runs: ${visible}`);
  await allowErrors(/status of 404/, async () => {
    await page.goto(`${url}/#/runs/${other}`);
    await page.waitForSelector("#run-missing");
    // Every one of the page's 404s inside this window, not after it.
    await page.waitForNetworkIdle({ idleTime: 300, timeout: 5000 }).catch(() => {});
  });
  await shot(page, out, "run-of-another-user");
});
