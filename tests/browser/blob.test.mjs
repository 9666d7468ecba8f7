// The file page and the raw route in a real browser (issue 34, points 1, 6 and 9): headless
// Chromium against `csg serve` over the code-browser repository of fixture.mjs.
//
// Run: CSG_BIN=/tmp/<you>/csg timeout 300 node --test blob.test.mjs

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  artifacts, serveCodeRepository, watchedPage, git, HOSTILE_NAME,
} from "./fixture.mjs";

let tmp, site, base, browser, shop, repo;

const blob = (rev, path) =>
  `${base}/sourcegraph/repos/${repo}/-/blob/${encodeURIComponent(rev)}/${path.split("/").map(encodeURIComponent).join("/")}`;
const raw = (rev, path) => blob(rev, path).replace("/-/blob/", "/-/raw/");

const served = serveCodeRepository();
before(async () => {
  ({ tmp, site, base, browser, shop, repo } = await served.ready());
});

/// Loads `url` until `selector` is on the page: the first index (definitions) is built in
/// the background after start.
async function gotoUntil(page, url, selector, tries = 150) {
  for (let i = 0; i < tries; i++) {
    await page.goto(url);
    if ((await page.locator(selector).count()) > 0) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${selector} never appeared on ${url}`);
}

test("Rust and Python files are highlighted (point 1)", async () => {
  const page = await watchedPage(browser);
  await page.goto(blob("main", "src/lib.rs"));
  const keywords = await page.$$eval("table.code .hl-keyword", (s) => s.map((e) => e.textContent));
  assert.ok(keywords.includes("pub") && keywords.includes("fn"), keywords.join(","));
  assert.ok((await page.locator(`table.code [class^="hl-comment"]`).count()) >= 2);
  assert.equal(await page.textContent("#L10 td.line"), "pub fn total(items: &[Item]) -> u64 {");

  await page.goto(blob("main", "app/shop.py"));
  const py = await page.$$eval("table.code .hl-keyword", (s) => s.map((e) => e.textContent));
  assert.ok(py.includes("class") && py.includes("def") && py.includes("return"), py.join(","));
  assert.ok((await page.locator("table.code .hl-string").count()) >= 1);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test("#L2-L4 marks its rows, shift-click extends (point 1)", async () => {
  const page = await watchedPage(browser);
  await page.goto(`${blob("main", "src/lib.rs")}#L2-L4`);
  assert.deepEqual(await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id)), ["L2", "L3", "L4"]);
  await page.click("#L6 td.num a");
  await page.click("#L8 td.num a", { modifiers: ["Shift"] });
  await page.waitForFunction(() => window.location.hash === "#L6-L8");
  assert.deepEqual(await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id)), ["L6", "L7", "L8"]);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test("a name links to its definition's line (point 1)", async () => {
  const page = await watchedPage(browser);
  await gotoUntil(page, blob("main", "src/checkout.rs"), 'table.code a.def:text-is("total")');
  const link = page.locator('table.code a.def:text-is("total")').first();
  const href = await link.getAttribute("href");
  assert.match(href, new RegExp(`/-/blob/${shop.head}/src/lib\\.rs#L10$`), href);
  await link.click();
  await page.waitForURL(/\/src\/lib\.rs#L10$/);
  assert.deepEqual(await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id)), ["L10"]);
  assert.match(await page.textContent("#L10"), /pub fn total/);
  // The outline is beside the code and links to lines.
  assert.ok((await page.locator("aside.blob-outline details.outline a").count()) >= 2);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test("the hostile-named file and hostile content stay text (point 9)", async () => {
  const page = await watchedPage(browser);
  await page.goto(blob("main", HOSTILE_NAME));
  assert.equal(await page.textContent("nav.crumbs span"), HOSTILE_NAME);
  assert.equal(
    await page.textContent("#L1 td.line"),
    "<script>window.__pwned = true</script><img src=x onerror=\"window.__pwned = true\">",
  );
  assert.equal(await page.locator("main script, main img, main em").count(), 0);
  await page.hover("nav.crumbs span");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test("a binary file says so; raw serves its exact bytes, never sniffed (points 1, 6)", async () => {
  const page = await watchedPage(browser);
  await page.goto(blob("main", "img/data.bin"));
  assert.match(await page.textContent("p.note.binary"), /Binary file \(8 B\)/);
  const rawHref = await page.getAttribute("p.note.binary a", "href");
  assert.equal(rawHref, `/sourcegraph/repos/${repo}/-/raw/${shop.head}/img/data.bin`);
  const response = await page.request.get(`${base}${rawHref}`);
  assert.equal(response.status(), 200);
  assert.equal(response.headers()["content-type"], "application/octet-stream");
  assert.equal(response.headers()["x-content-type-options"], "nosniff");
  assert.equal(response.headers()["content-security-policy"], "sandbox");
  assert.deepEqual([...(await response.body())], [0, 1, 2, 3, 0, 255, 254, 0]);

  // Text: exact bytes as git has them, as text/plain.
  const text = await page.request.get(raw("main", "src/checkout.rs"));
  assert.equal(text.headers()["content-type"], "text/plain; charset=utf-8");
  assert.equal(text.headers()["x-content-type-options"], "nosniff");
  assert.equal(await text.text(), git(shop.dir, ["show", "HEAD:src/checkout.rs"]) + "\n");

  assert.deepEqual(page.problems, []);
  await page.close();

  // The hostile file opened raw runs nothing (sandboxed, plain text). Not a watched page:
  // Chromium asks a plain-text document's origin for /favicon.ico, which the site lacks.
  const rawPage = await browser.newPage();
  await rawPage.goto(raw("main", HOSTILE_NAME));
  assert.equal(await rawPage.evaluate(() => window.__pwned), undefined);
  assert.match(await rawPage.textContent("body"), /<script>window.__pwned = true<\/script>/);
  await rawPage.close();
});

test("the large file is shown in pages with a clear note (point 1)", async () => {
  const page = await watchedPage(browser);
  await page.goto(blob("main", "docs/big.txt"));
  const note = await page.textContent("p.note.paging");
  assert.match(note, /This file is large \(12000 lines/);
  assert.match(note, /these are lines 1–\d+ of 12000/);
  const rows = await page.locator("table.code tr").count();
  assert.ok(rows > 1000 && rows < 12000, `${rows} rows on the first page`);
  await page.click('p.note.paging a:has-text("Next lines")');
  const first = await page.$eval("table.code tr", (r) => r.id);
  assert.equal(first, `L${rows + 1}`);
  assert.match(await page.textContent(`#L${rows + 1} td.line`), new RegExp(`^line ${rows + 1}: lorem`));
  assert.match(await page.textContent("p.note.paging"), /First page/);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test("the file page fits 360 px; screenshots light and dark (point 9)", async () => {
  const page = await watchedPage(browser);
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.setViewportSize({ width: 1280, height: 800 });
    await gotoUntil(page, `${blob("main", "src/checkout.rs")}#L4-L5`, "table.code a.def");
    await page.screenshot({ path: join(artifacts, `blob-${scheme}.png`), fullPage: true });
    await page.setViewportSize({ width: 360, height: 740 });
    await page.goto(`${blob("main", "src/lib.rs")}#L9-L12`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 360, `the page is ${width} px wide at 360`);
    await page.screenshot({ path: join(artifacts, `blob-360-${scheme}.png`), fullPage: true });
  }
  const colour = await page.$eval("table.code .hl-keyword", (e) => getComputedStyle(e).color);
  assert.notEqual(colour, await page.$eval("table.code td.line code", (e) => getComputedStyle(e).color));
  assert.deepEqual(page.problems, []);
  await page.close();
});
