// What every browser test file shares: `csg serve` on 127.0.0.1 over a fresh data directory,
// headless Chromium with a fresh profile, git with no user or system configuration, and the
// code-browser repository (issue 34) built with real commits by two authors.
//
// CSG_BIN names the binary (default target/debug/csg); CHROMIUM the browser
// (default /usr/bin/chromium). Screenshots go to `artifacts` (target/browser-artifacts/).

import { before, after } from "node:test";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const csg = process.env.CSG_BIN || join(root, "target/debug/csg");
export const artifacts = join(root, "target/browser-artifacts");
/// Markup that would run if any page let it through; tests then check `window.__pwned`.
export const hostile = "<script>window.__pwned = true</script><img src=x onerror=\"window.__pwned = true\">";

/// `git` in `cwd` with no global or system configuration; `env` adds variables (authors, dates).
export function git(cwd, args, env = {}) {
  return execFileSync("git", args, {
    cwd,
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_SYSTEM: "/dev/null", ...env },
    maxBuffer: 64 * 1024 * 1024,
  }).toString().trim();
}

/// A fresh temporary directory (removed by `stop`).
export function tempDir(prefix = "csg-browser-") {
  mkdirSync(artifacts, { recursive: true });
  return mkdtempSync(join(tmpdir(), prefix));
}

/// Starts `csg serve --repo <source>` over `<tmp>/data` and a headless Chromium with a fresh
/// profile; answers `{ base, browser, stop }`. `stop` ends both and removes `tmp`. `options`:
/// `port` to listen on (default: any free one), more `args` for `serve`, more `env`.
export async function startSite(tmp, sources, options = {}) {
  const repoArgs = sources.flatMap((s) => ["--repo", s]);
  const listen = `127.0.0.1:${options.port ?? 0}`;
  const args = ["--data-dir", join(tmp, "data"), "serve", ...repoArgs, "--listen", listen, ...(options.args ?? [])];
  const server = spawn(csg, args, {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, CSG_LOG: "warn", ...(options.env ?? {}) },
  });
  const base = await new Promise((resolveBase, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`csg serve printed no endpoint: ${seen}`)), 60000);
    server.stdout.on("data", (chunk) => {
      seen += chunk;
      const match = /MCP endpoint: (http:\/\/[^/]+)\//.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolveBase(match[1]);
      }
    });
    server.on("exit", (code) => reject(new Error(`csg serve exited with ${code}: ${seen}`)));
  });
  const browser = await chromium.launchPersistentContext(join(tmp, "chromium"), {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
    ],
  });
  const stop = async () => {
    await browser?.close();
    server?.kill("SIGTERM");
    rmSync(tmp, { recursive: true, force: true });
  };
  return { base, browser, stop };
}

/// A new page that records console errors, page errors and failed requests in `page.problems`
/// (a test asserts it is empty: "no console errors").
export async function watchedPage(browser) {
  const page = await browser.newPage();
  page.problems = [];
  page.on("console", (m) => { if (m.type() === "error") page.problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => page.problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => page.problems.push(`request failed: ${r.url()}`));
  return page;
}

// The authors of the code repository, as `git log` shows them.
export const ADA = { name: "Ada Lovelace", email: "ada@example.com" };
// Git drops `<` and `>` from names; `&` and quotes must still reach the page as text.
export const BOB = { name: "Bob & \"Builder\"", email: "bob@example.com" };

function commitAs(dir, who, date, message) {
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", message], {
    GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email, GIT_COMMITTER_DATE: date,
  });
  return git(dir, ["rev-parse", "HEAD"]);
}

/// A file name with markup in it (no `/`, so one file): shown as text everywhere.
export const HOSTILE_NAME = "<em onmouseover=\"window.__pwned=true\">hover & 'quoted'.txt";

// A 1x1 PNG: a binary file that is also a README image.
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cfc0f01f0005000201e2f2b2c80000000049454e44ae426082",
  "hex",
);

/// The code-browser repository (issue 34's proof): several commits by two authors (Bob's name
/// holds HTML), Rust and Python files whose names have definitions elsewhere in the repository,
/// a README with a table, a task list, a relative link and image and hostile HTML, a file
/// named with HTML in it, a binary, a large file (over the read budget), a rename (for
/// `--follow`), a tag `v1` and the branch `main`. Answers `{ dir, commits, ... }`.
export function codeRepository(parent, name = "shop") {
  const dir = join(parent, name);
  mkdirSync(join(dir, "src"), { recursive: true });
  mkdirSync(join(dir, "app"));
  mkdirSync(join(dir, "docs"));
  mkdirSync(join(dir, "img"));
  git(dir, ["init", "-q", "-b", "main"]);

  writeFileSync(join(dir, "src/lib.rs"), [
    "//! The shop's core.",
    "",
    "/// A priced item.",
    "pub struct Item {",
    "    pub name: String,",
    "    pub cents: u64,",
    "}",
    "",
    "/// The total of `items` in cents.",
    "pub fn total(items: &[Item]) -> u64 {",
    "    items.iter().map(|i| i.cents).sum()",
    "}",
    "",
  ].join("\n"));
  writeFileSync(join(dir, "app/main.py"), [
    "\"\"\"The shop's front door.\"\"\"",
    "",
    "",
    "class Cart:",
    "    def __init__(self):",
    "        self.items = []",
    "",
    "    def add(self, item):",
    "        self.items.append(item)",
    "",
    "",
    "def checkout(cart):",
    "    return len(cart.items)",
    "",
  ].join("\n"));
  writeFileSync(join(dir, "README.md"), [
    "# Shop",
    "",
    "A shop with a [guide](docs/guide.md) and a logo: ![logo](img/logo.png)",
    "",
    "| Part | Language |",
    "| ---- | -------- |",
    "| core | Rust     |",
    "| app  | Python   |",
    "",
    "- [x] carts",
    "- [ ] refunds",
    "",
    hostile,
    "",
    "[click me](javascript:window.__pwned=true) <a href=\"#\" onclick=\"window.__pwned=true\">or me</a>",
    "",
  ].join("\n"));
  writeFileSync(join(dir, "docs/guide.md"), "# Guide\n\nUse `total` for the sum.\n");
  writeFileSync(join(dir, "img/logo.png"), PNG);
  const first = commitAs(dir, ADA, "2026-01-05T10:00:00Z", "core: items and totals");

  // Bob: uses `total` from another file, renames the app's entry point.
  writeFileSync(join(dir, "src/checkout.rs"), [
    "use crate::{total, Item};",
    "",
    "/// What the customer pays.",
    "pub fn pay(items: &[Item]) -> u64 {",
    "    total(items) + shipping(items)",
    "}",
    "",
    "fn shipping(items: &[Item]) -> u64 {",
    "    if items.is_empty() { 0 } else { 499 }",
    "}",
    "",
  ].join("\n"));
  git(dir, ["mv", "app/main.py", "app/shop.py"]);
  writeFileSync(join(dir, HOSTILE_NAME), `${hostile}\n`);
  const second = commitAs(dir, BOB, "2026-02-10T12:30:00Z", `checkout: pay with shipping\n\nBody with ${hostile}`);
  git(dir, ["tag", "v1"]);

  // Ada again: changes a renamed file and adds a large file and a binary.
  const shop = [
    "\"\"\"The shop's front door.\"\"\"",
    "",
    "",
    "class Cart:",
    "    def __init__(self):",
    "        self.items = []",
    "",
    "    def add(self, item):",
    "        self.items.append(item)",
    "",
    "    def clear(self):",
    "        self.items = []",
    "",
    "",
    "def checkout(cart):",
    "    count = len(cart.items)",
    "    cart.clear()",
    "    return count",
    "",
  ];
  writeFileSync(join(dir, "app/shop.py"), shop.join("\n"));
  const big = Array.from({ length: 12000 }, (_, i) => `line ${i + 1}: ${"lorem ipsum dolor sit amet ".repeat(2)}`);
  writeFileSync(join(dir, "docs/big.txt"), big.join("\n") + "\n");
  writeFileSync(join(dir, "img/data.bin"), Buffer.from([0, 1, 2, 3, 0, 255, 254, 0]));
  const third = commitAs(dir, ADA, "2026-03-15T08:45:00Z", "app: clear the cart at checkout; big docs");

  return { dir, commits: [first, second, third], head: third };
}

/// Serves `codeRepository` (as `local/shop`) for the test file that calls this: registers
/// node:test's `before` (build, start) and `after` (stop) and answers `{ repo, ready }`;
/// `await ready()` (in the file's own `before`: root hooks do not wait for each other) gives
/// `{ tmp, shop, site, base, browser, repo }`.
export function serveCodeRepository() {
  const repo = "local/shop";
  let starting;
  const ready = () => (starting ??= (async () => {
    const tmp = tempDir();
    const shop = codeRepository(tmp);
    const site = await startSite(tmp, [shop.dir]);
    return { tmp, shop, site, base: site.base, browser: site.browser, repo };
  })());
  before(ready);
  after(async () => {
    if (starting) await (await starting.catch(() => null))?.site.stop();
  });
  return { repo, ready };
}
