// The run page's receipts on a broker whose database was altered, or that
// signs none (tests/web/t-dashboard.sh). Usage:
//   node receipts.mjs URL OUT_DIR RUN altered:SEQ|off
// altered:SEQ: receipt SEQ's payload was changed while the broker was
// stopped: it fails its signature and log checks, the next its chain.
// off: the broker signs no receipts: said so, no error.
import { check, expect, shot, text } from "./browser.mjs";

const [url, out, run, mode] = process.argv.slice(2);
await check(url, out, async ({ page }) => {
  await page.goto(`${url}/#/signin`);
  await page.waitForSelector("#token");
  await page.type("#token", "admin-t");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#runs-body");
  await page.goto(`${url}/#/runs/${run}`);
  if (mode === "off") {
    await page.waitForSelector("#receipts-off", { timeout: 5000 });
    expect(/This broker signs no receipts/.test(await text(page, "#receipts-off")), `no receipts: ${await text(page, "#receipts-off")}`);
    await shot(page, out, "run-no-receipts");
    return;
  }
  const seq = Number(mode.split(":")[1]);
  await page.waitForSelector("#receipts-table", { timeout: 5000 });
  const rows = await page.$$eval("#receipts-table tbody tr", (trs) => trs.map((tr) => ({ seq: Number(tr.dataset.seq), state: tr.dataset.state,
    checks: Object.fromEntries([...tr.querySelectorAll("li[data-check]")].map((li) => [li.dataset.check, { ok: li.dataset.ok, text: li.textContent }])) })));
  const altered = rows.find((r) => r.seq === seq), after = rows.find((r) => r.seq === seq + 1);
  console.log(`   altered receipt ${seq}: ${Object.values(altered?.checks ?? {}).map((c) => c.text).join(" | ")}`);
  expect(altered?.state === "failed", `the altered receipt ${seq} fails`);
  expect(altered?.checks.signature?.ok === "false" && /bad signature by key [0-9a-f]{64} \(payload or signature altered\)/.test(altered.checks.signature.text),
    "its signature check fails, named");
  expect(altered?.checks.log?.ok === "false" && /not in the log: its inclusion proof against the head of size \d+ fails/.test(altered.checks.log.text),
    "its log inclusion fails, named");
  expect(after?.state === "failed" && after.checks.chain?.ok === "false" && /missing predecessor: previous is/.test(after.checks.chain.text),
    `the next receipt's chain link fails: ${after?.checks.chain?.text}`);
  expect(rows.filter((r) => r.seq < seq).every((r) => r.state === "verified"), "the receipts before it still verify");
  expect(/FAILED/.test(await text(page, "#receipts-summary")) && /2 of \d+ receipts FAILED/.test(await text(page, "#receipts-summary")),
    `summary: ${await text(page, "#receipts-summary")}`);
  await shot(page, out, "run-receipt-altered");
});
