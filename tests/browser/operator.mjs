// The operator page on a phone (tests/operator_page.rs starts the cluster):
// at 390×844 every table fits the page (no horizontal scrolling, no cell
// past the right edge) and the events show their cause.
//
// usage: node operator.mjs URL SHOTS       prints "pass" at the end.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const [url, shots] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.TELOS_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
const page = await browser.newPage({ viewport: { width: 390, height: 844 }, hasTouch: true });
page.on("pageerror", (e) => { console.error(`page error: ${e}`); process.exitCode = 1; });
await page.goto(url);
await page.waitForFunction(
  () => document.querySelectorAll("#zones tbody tr").length > 0
    && /operator transfer/.test(document.getElementById("events").textContent),
  null, { timeout: 60_000 });
const cut = await page.evaluate(() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > width) out.push(`page ${document.documentElement.scrollWidth} px wide`);
  for (const td of document.querySelectorAll("td")) {
    const r = td.getBoundingClientRect();
    if (r.right > width + 0.5) out.push(`${td.dataset.label}: ${td.textContent} ends at ${r.right} px`);
  }
  return out;
});
await page.screenshot({ path: `${shots}/operator-phone.png`, fullPage: true });
await browser.close();
if (cut.length) {
  console.error(`cut off at 390 px:\n${cut.join("\n")}`);
  process.exit(1);
}
console.log("pass");
process.exit(process.exitCode || 0);
