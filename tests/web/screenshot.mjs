// A screenshot of one page of the dashboard, signed in: make demo's picture
// of the run it killed and moved. Usage: node screenshot.mjs URL TOKEN RUN OUT.png
// The demo's brokers have self-signed certificates: this local browser takes them.
import puppeteer from "puppeteer-core";

const [url, token, run, out] = process.argv.slice(2);
if (!out) {
  console.error("usage: node screenshot.mjs URL TOKEN RUN OUT.png");
  process.exit(2);
}
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  acceptInsecureCerts: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${url}/#/signin`);
  await page.waitForSelector("#token");
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#runs-body");
  await page.goto(`${url}/#/runs/${run}`);
  await page.waitForSelector("#timeline .point", { timeout: 15000 });
  // The receipts panel verifies in the browser after the timeline is drawn:
  // the picture waits for its verdict (or its word that there are none).
  await page.waitForSelector("#receipts-summary, #receipts-off, #receipts-error", { timeout: 20000 })
    .catch(() => console.error("screenshot: the receipts panel had not loaded after 20 s"));
  await page.screenshot({ path: out, fullPage: true });
} finally {
  await browser.close();
}
