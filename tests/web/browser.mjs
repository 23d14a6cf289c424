// Debian's chromium through puppeteer-core for the dashboard's test and
// benchmark: launch (no sandbox as root, no GPU), console errors collected,
// and the small checks both use.
import puppeteer from "puppeteer-core";
import { mkdirSync } from "node:fs";

let failures = 0, passes = 0;
export function expect(ok, what) {
  if (ok) { passes++; console.log(`ok: ${what}`); } else { failures++; console.log(`FAIL: ${what}`); }
}
export function fail(what) { failures++; console.log(`FAIL: ${what}`); }
function done() {
  console.log(`${passes} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}
export const text = (page, sel) => page.$eval(sel, (el) => el.textContent);

export async function shot(page, dir, name) {
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: `${dir}/${name}.png`, fullPage: true });
}

export async function launch(url, { width = 1280, height = 900 } = {}) {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Root in a container has no user namespace for the sandbox; no GPU here.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"],
  });
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  const consoleErrors = [];
  let allowed = null;   // a pattern of errors a step provokes on purpose (a 401, a 404)
  const note = (msg) => { if (!(allowed && allowed.test(msg))) consoleErrors.push(msg); };
  page.on("console", (m) => { if (m.type() === "error") note(m.text()); });
  page.on("pageerror", (e) => note(`page error: ${e.message}`));
  const allowErrors = async (pattern, fn) => {
    allowed = pattern;
    try { await fn(); } finally { allowed = null; }
  };
  return { browser, page, consoleErrors, allowErrors, url };
}

// check(url, out, async ({page, allowErrors}) => ...): a browser for the
// checks; a check that throws fails with a screenshot (out/failure.png);
// any console error the checks did not provoke on purpose fails too. Exits.
export async function check(url, out, checks) {
  const b = await launch(url);
  try {
    await checks(b);
    expect(b.consoleErrors.length === 0, `no console errors: ${b.consoleErrors.join(" | ")}`);
  } catch (e) {
    await shot(b.page, out, "failure").catch(() => {});
    fail(e.message);
  } finally {
    await b.browser.close();
  }
  done();
}
