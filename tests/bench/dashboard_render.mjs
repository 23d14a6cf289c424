// Time to first render of the dashboard's pages in Debian's chromium: from
// the navigation's start to the page's performance mark (runs-rendered,
// run-rendered: set once the table or the timeline is on the page, data
// included). Usage: node dashboard_render.mjs URL TOKEN RUN ROUNDS
//   or node dashboard_render.mjs URL TOKEN RUN poll SECONDS (a browser on the UI, for the heartbeat bench)
import { launch } from "../web/browser.mjs";

const [url, token, run, mode, arg] = process.argv.slice(2);
const { browser, page, consoleErrors } = await launch(url);
// The token, as the sign-in page keeps it (not on about:blank: no storage there).
const signIn = (t) => { if (location.protocol.startsWith("http")) sessionStorage.setItem("shardnet.token", t); };
await page.evaluateOnNewDocument(signIn, token);

async function firstRender(hash, mark) {
  await page.goto("about:blank");
  await page.goto(`${url}/${hash}`);
  if (process.env.TRACE) console.error(`loaded ${hash}`);
  await page.waitForFunction((m) => performance.getEntriesByName(m).length > 0, { timeout: 30000, polling: 10 }, mark);
  return page.evaluate((m) => [performance.getEntriesByName(m)[0].startTime, performance.getEntriesByName(m.replace("rendered", "data"))[0].startTime], mark);
}

if (mode === "poll") {
  // The runs page refreshes every 2 s; a run page follows its events.
  const other = await browser.newPage();
  await other.evaluateOnNewDocument(signIn, token);
  await other.goto(`${url}/#/runs/${run}`);
  await page.goto(`${url}/#/runs`);
  await new Promise((r) => setTimeout(r, Number(arg) * 1000));
} else {
  const rounds = Number(mode);
  const out = {};
  for (const [name, hash, mark] of [["runs", "#/runs", "runs-rendered"], ["run", `#/runs/${run}`, "run-rendered"]]) {
    const ms = [], data = [];
    for (let i = 0; i < rounds; i++) {
      const [rendered, arrived] = await firstRender(hash, mark);
      ms.push(rendered);
      data.push(arrived);
    }
    const median = (v) => v.slice().sort((a, b) => a - b)[Math.floor(v.length / 2)];
    out[name] = { median: median(ms), max: Math.max(...ms), data: median(data), all: ms.map((m) => Math.round(m)) };
  }
  out.resources = await page.evaluate(() => performance.getEntriesByType("resource").map((r) => `${r.name.replace(/^.*\/\/[^/]+/, "")} ${Math.round(r.startTime)}+${Math.round(r.duration)}`));
  out.counts = await page.evaluate(() => ({ events: document.querySelectorAll("#timeline .point, #timeline .seal").length }));
  console.log(JSON.stringify(out));
}
if (consoleErrors.length) console.error(`console errors: ${consoleErrors.join(" | ")}`);
await browser.close();
