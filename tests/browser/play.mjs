// The web client in a real browser (Debian's chromium through
// playwright-core), against a real gate and shards that tests/web_browser.rs
// started: create a character on a phone-sized page, walk across a shard
// boundary by clicking exits, go offline mid-typing and come back, live
// through a shard SIGKILL and a drain, and check that every journal line
// typed is there exactly once, in order. Screenshots go to SHOTS.
//
// usage: node play.mjs URL NAME PATH_JSON SHOTS
// Asks the test for faults on stdout ("ask: kill", "ask: drain") and waits
// for its "ok" on stdin; prints "pass" at the end.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { mkdirSync } from "node:fs";

const [url, name, pathJson, shots, operatorUrl] = process.argv.slice(2);
const path = JSON.parse(pathJson);
mkdirSync(shots, { recursive: true });
const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const STEP = 60_000;

async function ask(what) {
  console.log(`ask: ${what}`);
  const { value, done } = await answers.next();
  if (done || value.trim() !== "ok") throw new Error(`the test did not do ${what}: ${value}`);
}

const browser = await chromium.launch({
  executablePath: process.env.TELOS_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
const context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true });
const page = await context.newPage();
page.on("pageerror", (e) => { console.error(`page error: ${e}`); process.exitCode = 1; });
const output = () => page.evaluate(() => document.getElementById("output").textContent);

// Wait until the output after `from` characters matches `re`; its match.
async function waitOut(re, from) {
  await page.waitForFunction(
    ([src, flags, from]) => new RegExp(src, flags).test(document.getElementById("output").textContent.slice(from)),
    [re.source, re.flags, from],
    { timeout: STEP, polling: 100 },
  );
  return (await output()).slice(from).match(re);
}

async function type(line) {
  const from = (await output()).length;
  await page.fill("#input", line);
  await page.press("#input", "Enter");
  return from;
}

async function where() {
  const from = await type("where");
  // \s+: the gate wraps text to the page's width (Telos.Size), as NAWS.
  return (await waitOut(/where: zone=\S+\s+room=(\S+)\s+shard=(\S+)/, from)).slice(1);
}

const journal = [];
async function note(text) {
  journal.push(text);
  const from = await type(`journal ${text}`);
  await waitOut(/Noted\./, from);
}

await page.goto(url);
await waitOut(/create <name> <password>/, 0);
let from = await type(`create ${name} correct horse battery`);
await waitOut(new RegExp(`Welcome, ${name}`), from);
await page.waitForFunction(() => document.getElementById("room-name").textContent !== "—", null, { timeout: STEP });
await page.waitForFunction(() => document.querySelector("#vitals .bar"), null, { timeout: STEP });
const firstRoom = await page.textContent("#room-name");
await page.screenshot({ path: `${shots}/client-phone.png` });

// Walk to the other shard's zone by clicking the exits in the room panel.
for (const dir of path) {
  const before = await page.textContent("#room-name");
  const exit = page.getByRole("button", { name: `Go ${dir}` });
  await exit.click({ timeout: STEP });
  await page.waitForFunction((b) => document.getElementById("room-name").textContent !== b, before, { timeout: STEP });
}
const [room, shard] = await where();
if (shard !== "shard-b") throw new Error(`walked to ${room} on ${shard}, not shard-b`);
if ((await page.textContent("#room-name")) === firstRoom) throw new Error("the room panel did not change");
await note("web-1");
await page.screenshot({ path: `${shots}/client-walked.png` });

// Offline mid-typing: lines typed while offline are sent once it is back.
await page.fill("#input", "journal web-");
await context.setOffline(true);
await page.waitForFunction(() => document.getElementById("status").classList.contains("offline"), null, { timeout: STEP });
await page.fill("#input", "journal web-2");
await page.press("#input", "Enter");
await page.fill("#input", "journal web-3");
await page.press("#input", "Enter");
journal.push("web-2", "web-3");
await page.screenshot({ path: `${shots}/client-offline.png` });
await new Promise((r) => setTimeout(r, 1500));
await context.setOffline(false);
await page.waitForFunction(() => document.getElementById("status").textContent === "Connected", null, { timeout: STEP });
const [roomBack] = await where();
if (roomBack !== room) throw new Error(`resumed in ${roomBack}, not ${room}`);

// A shard SIGKILL (restarted), then a drain: the page plays on.
await ask("kill");
await note("web-4");
await ask("drain");
await note("web-5");
const [, shardAfter] = await where();
if (shardAfter !== "shard-a") throw new Error(`after the drain on ${shardAfter}`);

// Every journal line exactly once, in order.
from = await type("journal");
await waitOut(/journal end \d+/, from);
const text = (await output()).slice(from);
const got = [...text.matchAll(/journal \d+: (web-\d+)/g)].map((m) => m[1]);
if (JSON.stringify(got) !== JSON.stringify(journal)) {
  throw new Error(`journal ${JSON.stringify(got)}, expected ${JSON.stringify(journal)}`);
}
await page.screenshot({ path: `${shots}/client-journal.png` });
await page.setViewportSize({ width: 1280, height: 800 });
await page.screenshot({ path: `${shots}/client-desktop.png` });

// The operator page: the zones the drain moved, live, and its events.
if (operatorUrl) {
  const op = await context.newPage();
  await op.setViewportSize({ width: 1280, height: 900 });
  await op.goto(operatorUrl);
  await op.waitForFunction(
    () => document.querySelectorAll("#zones tbody tr").length > 0
      // A zone the kill or the drain moved (the drain's flip, or, after
      // the kill, a claim of the lapsed zone: "zone Z: - -> shard-a").
      && /zone \S+: \S+ -> shard-a/.test(document.getElementById("events").textContent),
    null, { timeout: STEP });
  await op.screenshot({ path: `${shots}/operator.png`, fullPage: true });
}
await browser.close();
console.log("pass");
process.exit(process.exitCode || 0);
