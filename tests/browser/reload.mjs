// The web client across a reload (tests/web_reload.rs starts the gate):
// on a phone-sized page, log in, journal a line, type another and reload
// at once. The reloaded tab resumes the session (no login asked), still
// shows what it showed (the pane, the room and vitals panels), and the
// journal has both lines exactly once; the
// who panel fills from the gate's Telos.Who (the page has no Refresh) and
// lists the player once (the old page left no second session). A new tab
// gets a login prompt of its own (it does not take the session), and the
// player it creates shows in the first tab's who panel by itself.
//
// usage: node reload.mjs URL SHOTS       prints "pass" at the end.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const [url, shots] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
const STEP = 60_000;

const browser = await chromium.launch({
  executablePath: process.env.TELOS_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
const context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true });

function fail(why) { throw new Error(why); }
const outOf = (page) => page.evaluate(() => document.getElementById("output").textContent);

async function waitOut(page, re, from) {
  await page.waitForFunction(
    ([src, flags, from]) => new RegExp(src, flags).test(document.getElementById("output").textContent.slice(from)),
    [re.source, re.flags, from],
    { timeout: STEP, polling: 100 },
  );
  return (await outOf(page)).slice(from).match(re);
}

async function type(page, line) {
  const from = (await outOf(page)).length;
  await page.fill("#input", line);
  await page.press("#input", "Enter");
  return from;
}

// The who panel lists exactly `names` (sorted), with no click.
async function whoIs(page, names) {
  const want = JSON.stringify([...names].sort());
  await page.waitForFunction(
    (want) => JSON.stringify([...document.querySelectorAll("#who li")].map((l) => l.textContent).sort()) === want,
    want, { timeout: STEP, polling: 100 },
  ).catch(async () => {
    const got = await page.evaluate(() => [...document.querySelectorAll("#who li")].map((l) => l.textContent));
    fail(`the who panel shows ${JSON.stringify(got)}, not ${want}`);
  });
}

async function login(page, name) {
  page.on("pageerror", (e) => { console.error(`page error: ${e}`); process.exitCode = 1; });
  await page.goto(url);
  await waitOut(page, /create <name> <password>/, 0);
  const from = await type(page, `create ${name} correct horse battery`);
  await waitOut(page, new RegExp(`Welcome, ${name}`), from);
}

const page = await context.newPage();
await login(page, "Reloader");
let from = await type(page, "journal r-1");
await waitOut(page, /Noted\./, from);
const before = await outOf(page);
const roomBefore = await page.textContent("#room-name");
if (roomBefore === "—") fail("no room in the panel before the reload");

// Typed, then reloaded at once: sent or not, acked or not, it counts once.
await page.fill("#input", "journal r-2");
await page.press("#input", "Enter");
await page.reload();
await page.waitForFunction(() => document.getElementById("status").textContent === "Connected", null, { timeout: STEP });
const after = await outOf(page);
// (The password typed with `create` is kept as asterisks.)
if (!after.startsWith(before.replace("correct horse battery", "********"))) fail(`after the reload the pane lost what it showed:\n${after}`);
if (/create <name> <password>/.test(after.slice(before.length))) fail(`the reload asked for a login:\n${after}`);
if (after.includes("correct horse")) fail("the password typed with create was kept across the reload");
// The side panels too: the room, the vitals.
if ((await page.textContent("#room-name")) !== roomBefore) fail("the room panel was lost in the reload");
if (!(await page.locator("#vitals .bar").count())) fail("the vitals panel was lost in the reload");
from = await type(page, "journal");
await waitOut(page, /journal end \d+/, from);
const got = [...(await outOf(page)).slice(from).matchAll(/journal \d+: (r-\d+)/g)].map((m) => m[1]);
if (JSON.stringify(got) !== JSON.stringify(["r-1", "r-2"])) fail(`journal after the reload: ${JSON.stringify(got)}`);
if (await page.locator("#who-refresh").count()) fail("the who panel still has a Refresh button");
await whoIs(page, ["Reloader"]);
await page.screenshot({ path: `${shots}/reload-resumed.png` });

// A new tab is a new login; the first tab keeps its session and sees the
// newcomer arrive in its who panel.
const tab = await context.newPage();
await login(tab, "Newcomer");
await whoIs(page, ["Newcomer", "Reloader"]);
from = await type(page, "where");
await waitOut(page, /where: zone=/, from);
if ((await page.textContent("#status")) !== "Connected") fail("the first tab lost its session to the new one");
await page.screenshot({ path: `${shots}/reload-who.png` });

// The tab's icon is served.
const icon = await page.request.get(new URL("/favicon.ico", url).href);
if (icon.status() !== 200) fail(`/favicon.ico: ${icon.status()}`);
await browser.close();
console.log("pass");
process.exit(process.exitCode || 0);
