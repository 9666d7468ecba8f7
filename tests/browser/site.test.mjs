// The website in a real browser (issue: website; SPEC §9 routes, M-6, W-6's Plugins tab):
// Debian's headless Chromium, driven by playwright-core, against `csg serve` on 127.0.0.1
// with a fresh data directory and a repository made here with git (set-up: fixture.mjs).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, basename } from "node:path";
import { artifacts, hostile, git as gitIn, tempDir, startSite } from "./fixture.mjs";

// A repository plugin module: memory, the three ABI exports and the metadata section, with
// `description` set to `hostile`. Enough for discovery (W-6), which never runs it.
function pluginModule(name, description) {
  const leb = (n) => {
    const out = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n) byte |= 0x80;
      out.push(byte);
    } while (n);
    return out;
  };
  const bytes = (s) => [...Buffer.from(s, "utf8")];
  const vec = (items) => [...leb(items.length), ...items.flat()];
  const name_ = (s) => [...leb(Buffer.byteLength(s)), ...bytes(s)];
  const section = (id, body) => [id, ...leb(body.length), ...body];
  const I32 = 0x7f, I64 = 0x7e;
  const types = vec([
    [0x60, ...vec([[I32]]), ...vec([[I32]])],
    [0x60, ...vec([[I32], [I32]]), ...vec([])],
    [0x60, ...vec([[I32], [I32]]), ...vec([[I64]])],
  ]);
  const body = (code) => [...leb(code.length + 1), 0x00, ...code];
  const metadata = JSON.stringify({
    name, abi_version: 2, operations: ["read", "read_many"], default_enabled: false,
    title: "Hostile <b>title</b>", description, version: "1.0.0",
  });
  return Buffer.from([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, types),
    ...section(3, vec([[0], [1], [2]])),
    ...section(5, vec([[0x00, 0x01]])),
    ...section(7, vec([
      [...name_("memory"), 0x02, 0],
      [...name_("alloc"), 0x00, 0],
      [...name_("dealloc"), 0x00, 1],
      [...name_("enrich"), 0x00, 2],
    ])),
    ...section(10, vec([
      body([0x41, 0x10, 0x0b]),
      body([0x0b]),
      body([0x42, 0x00, 0x0b]),
    ])),
    ...section(0, [...name_("sourcegraph.plugin.v1"), ...bytes(metadata)]),
  ]);
}

// `browser` is the persistent context of the fresh profile.
let tmp, site, base, browser, repo;

function git(cwd, ...args) {
  return gitIn(cwd, args);
}

before(async () => {
  tmp = tempDir();
  const source = join(tmp, "handbook");
  mkdirSync(join(source, "docs"), { recursive: true });
  mkdirSync(join(source, "plugins"));
  const guide = Array.from({ length: 12 }, (_, i) => `guide line ${i + 1}${i === 2 ? " <b>not bold</b>" : ""}`);
  writeFileSync(join(source, "docs/guide.md"), guide.join("\n") + "\n");
  writeFileSync(join(source, "README.md"), "# Handbook\n");
  mkdirSync(join(source, "src"));
  writeFileSync(join(source, "src/shop.py"), "class Shop:\n    def open(self):\n        return 1\n\n\ndef main():\n    Shop().open()\n");
  writeFileSync(join(source, "plugins/hostile.sourcegraph.wasm"), pluginModule("hostile", hostile));
  git(source, "init", "-q", "-b", "main");
  git(source, "add", ".");
  git(source, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "handbook");
  repo = `local/${basename(source)}`;
  site = await startSite(tmp, [source]);
  ({ base, browser } = site);
});

after(async () => {
  await site?.stop();
});

test("repository → file → line anchor", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/sourcegraph/`);
  await page.click(`a:text-is("${repo}")`);
  assert.match(await page.textContent("dl.facts"), /Default branch\s*main/);
  await page.click('a:text-is("docs/")');
  await page.click('a:text-is("guide.md")');
  assert.equal(await page.textContent("#L3 td.line"), "guide line 3 <b>not bold</b>");
  assert.equal(await page.locator("table.code b").count(), 0, "file content is text, not markup");

  // The blob URL form the evidence-chain plugin links to, with a line range.
  const commit = git(join(tmp, "handbook"), "rev-parse", "HEAD");
  await page.goto(`${base}/sourcegraph/repos/${repo}/-/blob/${commit}/docs/guide.md#L2-L4`);
  const highlighted = await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id));
  assert.deepEqual(highlighted, ["L2", "L3", "L4"]);
  await page.screenshot({ path: join(artifacts, "file-view.png"), fullPage: true });
  await page.close();
});

test("a definition in the outline highlights its lines", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/sourcegraph/repos/${repo}/-/blob/HEAD/src/shop.py`);
  assert.match(await page.textContent("details.outline summary"), /Outline \(3\)/);
  await page.click('details.outline a:text-is("open")');
  const highlighted = await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id));
  assert.deepEqual(highlighted, ["L2", "L3"]);
  await page.screenshot({ path: join(artifacts, "outline.png"), fullPage: true });
  await page.close();
});

test("the Plugins tab shows hostile metadata as text", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/sourcegraph/repos/${repo}`);
  await page.click('nav.tabs a:text-is("Plugins")');
  const row = page.locator("table.plugins tbody tr");
  assert.equal(await row.count(), 1);
  assert.equal(await row.locator("td.description").textContent(), hostile);
  assert.equal(await page.locator("main script, main img").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.match(await row.textContent(), /hostile.*Hostile <b>title<\/b>.*1\.0\.0.*plugins.*read, read_many.*off/s);
  await page.screenshot({ path: join(artifacts, "plugins-tab.png"), fullPage: true });
  await page.close();
});

test("the access page's configuration points at this server", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/sourcegraph/connect`);
  const config = JSON.parse(await page.textContent("#config-json"));
  const entry = config.mcpServers["context-sourcegraph"];
  assert.equal(entry.type, "http");
  assert.equal(entry.url, `${base}/sourcegraph/mcp?plugins=auto`);
  const withToken = JSON.parse(await page.textContent("#config-json-token"));
  assert.equal(withToken.mcpServers["context-sourcegraph"].headers.Authorization, "Bearer <your-api-token>");
  const codex = await page.textContent("#config-codex");
  assert.ok(codex.includes(`url = "${base}/sourcegraph/mcp?plugins=auto"`), codex);
  assert.ok(codex.includes('bearer_token_env_var = "SOURCEGRAPH_API_TOKEN"'), codex);
  assert.equal(await page.locator("button[data-copy]").count(), 3);
  await page.screenshot({ path: join(artifacts, "connect.png"), fullPage: true });
  await page.close();
});

test("search links to the line", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/sourcegraph/search`);
  await page.fill('input[name="q"]', "guide line 7");
  await page.click('form.search button[type="submit"]');
  // The first index is built in the background after start: search again until it is.
  const hit = page.locator('section.hits a:has-text("docs/guide.md:7")');
  for (let i = 0; i < 100 && (await hit.count()) === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await page.reload();
  }
  await hit.click();
  await page.waitForSelector("tr.hl");
  assert.deepEqual(await page.$$eval("tr.hl", (rows) => rows.map((r) => r.id)), ["L7"]);
  await page.close();
});
