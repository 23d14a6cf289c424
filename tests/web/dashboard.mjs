// Drives the dashboard in Debian's chromium (puppeteer-core, no browser
// download) and checks what a person would see. Usage:
//   node dashboard.mjs URL OUT_DIR LIVE_SCRIPT POLICY_SCRIPT
// LIVE_SCRIPT posts a new event for r-move while its page is open;
// POLICY_SCRIPT seals two slow checkpoints of r-auto (a new policy version).
import { execFile } from "node:child_process";
import { check, expect, shot, fail, text } from "./browser.mjs";

const [url, out, live, policyScript] = process.argv.slice(2);
const run = (script) => new Promise((res, rej) => execFile(script, (e) => (e ? rej(e) : res())));
await check(url, out, async ({ page, allowErrors }) => {
  const go = async (hash, selector) => {
    await page.goto(`${url}/${hash}`);
    await page.waitForSelector(selector, { timeout: 5000 });
  };
  // Sign-in: a wrong token is refused with the broker's reason, a user's kept.
  await page.goto(`${url}/`);
  await page.waitForSelector("#token");
  await allowErrors(/status of 401/, async () => {
    await page.type("#token", "wrong-token");
    await page.click("#signin-button");
    await page.waitForFunction(() => /Not signed in/.test(document.querySelector("#signin-msg")?.textContent ?? ""));
  });
  expect(/not known/.test(await text(page, "#signin-msg")), `a wrong token's refusal names why: ${await text(page, "#signin-msg")}`);
  await shot(page, out, "signin");
  await page.$eval("#token", (el) => { el.value = ""; });
  await page.type("#token", "daemon-t");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#runs-body tr");
  const runs = await page.$$eval("#runs-body tr", (trs) => trs.map((tr) => tr.dataset.run));
  expect(runs.includes("r-move") && runs.includes("r-daemon"), `daemon's runs are listed: ${runs}`);
  expect(!runs.includes("r-bin"), `another user's run is not listed: ${runs}`);
  const row = await page.$eval('#runs-body tr[data-run="r-move"]', (tr) => [...tr.cells].map((c) => c.textContent));
  expect(row[2].includes("RUNNING") && row[3] === "alpha" && row[4] === "2" && row[5].startsWith("2/2") && row[7] === "ckpt-100",
    `r-move's row: state, cluster alpha, 2 attempts, 2/2 workers, last seal ckpt-100: ${row}`);
  await shot(page, out, "runs");

  // Sorting by a column's header, and the keyboard: Tab reaches a row, Enter opens it.
  await page.click("#runs-table th:nth-child(1) button");
  const sorted = await page.$$eval("#runs-body tr", (trs) => trs.map((tr) => tr.dataset.run));
  expect(JSON.stringify(sorted) === JSON.stringify([...sorted].sort()), `sorted by run: ${sorted}`);
  await page.focus('#runs-body tr[data-run="r-move"]');
  await page.keyboard.press("Enter");
  await page.waitForSelector("#timeline");

  // Another user's run by its URL: not found, nothing of it shown.
  await allowErrors(/status of 404/, async () => {
    await go("#/runs/r-bin", "#run-missing");
    // The page asks for several of the run's resources at once: every one's
    // 404 lands inside this window, not after it (a loaded machine).
    await page.waitForNetworkIdle({ idleTime: 300, timeout: 5000 }).catch(() => {});
  });
  expect(/no run r-bin/.test(await text(page, "#run-missing")), "another user's run URL says not found");
  await shot(page, out, "run-of-another-user");

  // The capacity market: both clusters unknown (no Slurm answers), never
  // available, and the silent peer unknown.
  await go("#/capacity", "#capacity-at");
  const cap = await page.$$eval("#capacity-body tr[data-cluster]", (trs) => trs.map((tr) => [tr.dataset.cluster, tr.cells[3].textContent, tr.cells[8].textContent]));
  expect(cap.length === 2 && cap.every(([, st, n]) => st.startsWith("unknown") && n === "unknown"), `capacity rows unknown: ${JSON.stringify(cap)}`);
  expect(/broker east: unknown/.test(await text(page, "#capacity-peers")), `the silent peer is unknown: ${await text(page, "#capacity-peers")}`);
  expect(/queried at/.test(await text(page, "#capacity-at")), "capacity says when it was queried");
  await shot(page, out, "capacity");

  // The run killed on beta and resumed on alpha, as an admin sees it.
  await page.evaluate(() => sessionStorage.setItem("shardnet.token", "admin-t"));
  await go("#/runs/r-move", "#timeline");
  const lanes = await page.$$eval("#timeline .lane-label", (ls) => ls.map((l) => l.textContent));
  expect(lanes.length === 2 && lanes.includes("west / beta") && lanes.includes("west / alpha"), `two lanes, beta and alpha: ${lanes}`);
  const kinds = await page.$$eval("#timeline .point", (ps) => ps.map((p) => p.dataset.kind));
  for (const k of ["FAULT", "PLACEMENT", "RECOVERED"]) expect(kinds.includes(k), `a ${k} point: ${kinds}`);
  expect((await page.$$("#timeline .lost")).length === 1, "the work lost between ckpt-100 and the FAULT is shaded");
  expect((await page.$$("#timeline .seal")).length === 1, "one SEALED mark");
  expect((await page.$$("#timeline .pause")).length === 1 && /paused \d/.test(await text(page, "#timeline")),
    "Slurm's own requeue of attempt 2 is a labelled pause on its bar");
  expect(/lost \d/.test(await text(page, "#timeline")), "the lost work is labelled in text");
  const phases = await page.$$eval("#run-recoveries .phase", (ps) => ps.map((p) => p.textContent));
  expect(phases.length === 4 && phases.every((p) => !/not yet/.test(p)), `detect, place, start, first step with seconds: ${phases}`);
  expect(/beta: not chosen: 1 idle node without b1/.test(await text(page, "#placement-list")), "placement reasons name the rejected cluster");
  expect(/ckpt-100 ← \(first\)/.test(await text(page, "#lineage")), "checkpoint lineage");
  // Goodput (doc/goodput.md): the broker's figures, one row for b1's fault, resumed from ckpt-100.
  const gp = await page.$$eval("#goodput-faults tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  expect(gp.length === 1 && gp[0][1] === "b1" && /NODE_FAIL/.test(gp[0][2]) && gp[0][4] === "ckpt-100" && gp[0][5] === "attempt 2",
    `one fault row: b1, its cause, resumed from ckpt-100 by attempt 2: ${JSON.stringify(gp)}`);
  expect(/^[\d.]+% productive: .* of .* wall so far/.test(await text(page, "#goodput-ratio")), `the ratio: ${await text(page, "#goodput-ratio")}`);
  expect(/Lost.*redone .*detection .*queue wait/.test(await text(page, "#goodput-parts")), `lost time by category: ${await text(page, "#goodput-parts")}`);
  expect(!/null/.test(await text(page, "#run-lineage")), "the lineage shows no stray text");
  // A point opens with the keyboard to its cause and evidence.
  await page.$eval('#timeline .point[data-kind="FAULT"]', (el) => el.focus());   // SVG: not an HTMLElement
  await page.keyboard.press("Enter");
  await page.waitForSelector("#event-open");
  expect(/last_seen/.test(await text(page, "#event-open")) && /NODE_FAIL/.test(await text(page, "#event-open")), "the FAULT opens to its evidence");
  await page.waitForFunction(() => /live/.test(document.querySelector("#run-live")?.textContent ?? ""), { timeout: 5000 });
  await shot(page, out, "run");

  // r-fail's FAILED event: the job's stderr tail is shown as its lines of text, never as markup.
  await go("#/runs/r-fail", "#events-table");
  await page.waitForFunction(() => /FAILED/.test(document.querySelector("#events-table")?.textContent ?? ""), { timeout: 5000 })
    .catch(() => fail("r-fail's FAILED event is not listed"));
  await page.$$eval("#events-table tr.clickable", (trs) => trs.find((tr) => /FAILED/.test(tr.textContent)).click());
  await page.waitForSelector("#event-open .stderr-tail");
  const tail = await page.$eval("#event-open .stderr-tail", (el) => el.textContent);
  expect(tail === 'loading shards\n<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>', `the tail as text: ${JSON.stringify(tail)}`);
  expect(await page.$$eval("#event-open img, #event-open script", (els) => els.length) === 0 && await page.evaluate(() => window.pwned === undefined),
    "no element made of the tail, nothing of it ran");
  expect(/--shardnet-fatal-exit says is not to be retried; stderr: <img src=x/.test(await text(page, "#event-open")), "the cause names the fatal exit and the tail's last line");
  await shot(page, out, "run-failed-stderr");
  await go("#/runs/r-move", "#timeline");
  await page.waitForFunction(() => /live/.test(document.querySelector("#run-live")?.textContent ?? ""), { timeout: 5000 });

  // A new event while the page is open: on it within 1 s, no reload.
  const seals = (await page.$$("#timeline .seal")).length;
  const started = Date.now();
  await run(live);
  await page.waitForFunction((n) => document.querySelectorAll("#timeline .seal").length > n, { timeout: 1000 }, seals)
    .catch(() => fail("the live SEALED event did not appear within 1 s"));
  console.log(`ok: live event on the page ${Date.now() - started} ms after it was posted (no reload)`);
  expect(/ckpt-200/.test(await text(page, "#events-table")), "the live event is in the event table");

  // Receipts, verified in the browser: every one good, the live seal's too.
  await page.waitForFunction(() => /ckpt-200 sealed/.test(document.querySelector("#receipts-table")?.textContent ?? ""), { timeout: 5000 })
    .catch(() => fail("the live seal's receipt was not listed within 5 s"));
  const receipts = await page.$$eval("#receipts-table tbody tr", (trs) => trs.map((tr) => ({ seq: tr.dataset.seq, state: tr.dataset.state,
    kind: tr.cells[1].textContent, checks: [...tr.querySelectorAll("li[data-check]")].map((li) => `${li.dataset.check}=${li.dataset.ok}`) })));
  console.log(`   receipts: ${receipts.map((r) => `${r.seq} ${r.kind} ${r.state}`).join("; ")}`);
  expect(receipts.length >= 2 && receipts.every((r) => r.state === "verified"), `every receipt of r-move verified: ${JSON.stringify(receipts)}`);
  expect(receipts.every((r) => ["signature", "statement", "chain", "log"].every((c) => r.checks.includes(`${c}=true`))),
    "each receipt's signature (Ed25519 in WebCrypto), Statement, chain and log inclusion checked and good");
  expect(receipts.map((r) => Number(r.seq)).join() === receipts.map((_, i) => i + 1).join(), "seq 1, 2, … without a gap");
  expect(/Checked in this browser: each receipt's Ed25519 signature/.test(await text(page, "#receipts-checks")), "the page says which checks were done");
  expect(/All \d+ receipts verified/.test(await text(page, "#receipts-summary")), `summary: ${await text(page, "#receipts-summary")}`);
  expect((await page.$eval("#policy", (el) => el.dataset.state)) === "fixed", "r-move's policy: fixed by the job (its agents ask for none)");
  await shot(page, out, "run-receipts");

  // r-auto: the broker's policy, its inputs with their sources, live.
  await go("#/runs/r-auto", '#policy[data-state="in_force"]');
  const headline = await text(page, "#policy-headline");
  expect(/in force: checkpoint every \d+ steps = [\d.]+ (s|min) of compute \(policy v1, Daly 2006\)/.test(headline), `the interval in force: ${headline}`);
  expect(/now computed: every \d+ steps = .* of compute; Daly .*, Young 1974 .*, complete model's optimum /.test(await text(page, "#policy")) &&
    /expected waste [\d.]+% of wall time/.test(await text(page, "#policy")), "Daly, Young, the optimum and the expected waste");
  const inputs = await page.$$eval("#policy-inputs tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  console.log(`   policy inputs: ${inputs.map((r) => r.join(" | ")).join("; ")}`);
  const input = (name) => inputs.find((r) => r[0] === name) ?? [];
  expect(input("write time (delta)")[1] === "0.50 s" && input("write time (delta)")[2] === "measured, 1 sealed checkpoint (median)", "δ measured, one seal");
  expect(/^measured, \d+ steps$/.test(input("step time")[2] ?? ""), "step time measured, with its count");
  expect(/^a node's 6\d\.\d min \/ 1 node: 0 interruptions in .* node-hours observed \+ prior 1 h \(prior\)$/.test(input("mean time to interruption (M)")[2] ?? ""),
    "M from the site's prior of 1 node-hour, its observation said");
  expect(input("restart (R)")[2] === "measured, 1 recovery (median)", "R measured: r-move's recovery");
  const tiers = await page.$$eval("#policy-tiers tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent).join(" ")));
  expect(tiers.length === 1 && /^other_cluster 1 \d\.\d\d s 0\.60 s 2\.30 s 1\.00 s \d\.\d\d s$/.test(tiers[0]),
    `the recovery phases per tier (detect, place, start, first step, total): ${tiers}`);
  await page.waitForSelector("#receipts-table", { timeout: 5000 });
  const first = await page.$eval('#receipts-table tr[data-seq="1"]', (tr) => [tr.dataset.state, tr.cells[1].textContent, tr.cells[3].textContent]);
  expect(first[0] === "verified" && first[1] === "attempt-started" && /^attempt 1 started on alpha, job 31, nodes p1, owner daemon, 1 of 1 ranks reported; torch 1\.13\.0, python 3\.11\.2$/.test(first[2]),
    `r-auto's attempt-started receipt, what it attests: ${first}`);
  await shot(page, out, "run-policy");
  await page.evaluate(() => { window.notReloaded = true; });
  // A hidden tab gives its event stream up (six connections per broker in
  // HTTP/1.1) and resumes after its last event when shown: what came while
  // hidden appears then, without a gap.
  const setVisibility = (v) => page.evaluate((v) => {
    Object.defineProperty(document, "visibilityState", { value: v, configurable: true });
    document.dispatchEvent(new Event("visibilitychange"));
  }, v);
  await setVisibility("hidden");
  expect(/paused while this tab is hidden/.test(await text(page, "#run-live")), `a hidden run page pauses its stream: ${await text(page, "#run-live")}`);
  const before = (await text(page, "#events-table")).match(/SEALED/g)?.length ?? 0;
  const policyStarted = Date.now();
  await run(policyScript);
  await new Promise((r) => setTimeout(r, 700));
  expect(((await text(page, "#events-table")).match(/SEALED/g)?.length ?? 0) === before, "no event reached the hidden page's table");
  await setVisibility("visible");
  await page.waitForFunction((n) => (document.querySelector("#events-table")?.textContent.match(/SEALED/g)?.length ?? 0) >= n + 2, { timeout: 5000 }, before)
    .then(() => expect(true, "shown again, the page has the seals posted while it was hidden"), () => fail("the seals posted while hidden did not appear once shown"));
  await page.waitForFunction(() => /live/.test(document.querySelector("#run-live")?.textContent ?? ""), { timeout: 5000 })
    .catch(() => fail("the stream did not resume once the page was shown"));
  await page.waitForFunction(() => /policy v[2-9]/.test(document.querySelector("#policy-headline")?.textContent ?? ""), { timeout: 5000 })
    .catch(() => fail("the policy panel did not show a new version within 5 s"));
  expect(await page.evaluate(() => window.notReloaded === true), "the policy panel refreshed without a reload");
  console.log(`ok: policy v2 on the page ${Date.now() - policyStarted} ms after the slow seals were posted`);
  expect(/POLICY/.test(await text(page, "#events-table")), "the POLICY event is in the event table");
  await page.waitForFunction(() => document.querySelector("#policy-inputs tbody tr")?.cells[2].textContent === "measured, 3 sealed checkpoints (median)",
    { timeout: 7000 }).then(() => expect(true, "δ now the median of three seals"), () => fail("δ did not become the median of three seals"));
  await shot(page, out, "run-policy-v2");
  await go("#/runs/r-move", "#receipts-table");

  // 200% zoom: the page still shows the timeline and reflows its tables.
  await page.setViewport({ width: 640, height: 900, deviceScaleFactor: 2 });
  await page.waitForFunction(() => Number(document.querySelector("#timeline")?.getAttribute("width")) <= 640, { timeout: 2000 })
    .catch(() => fail("the timeline was not drawn again to the narrower page"));
  await shot(page, out, "run-zoom-200");
});
