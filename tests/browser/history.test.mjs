// The history pages in a real browser (issue 34 points 2, 3, 4 and 9): blame, commits, one
// commit and compare on the code-browser repository (fixture.mjs), each checked against real
// `git` on the same repository, with repository text (Bob's name, a hostile commit body, a file
// named with markup) kept as text and no console errors. Screenshots of the blame and commit
// pages, light and dark, go to target/browser-artifacts/.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  artifacts, git, serveCodeRepository, watchedPage, hostile, HOSTILE_NAME, ADA, BOB,
} from "./fixture.mjs";

let tmp, site, base, browser, shop, repo;
const url = (rest) => `${base}/sourcegraph/repos/${repo}/-/${rest}`;

const served = serveCodeRepository();
before(async () => {
  ({ tmp, site, base, browser, shop, repo } = await served.ready());
});

/// What every page must keep: no script from content ran, no console errors.
async function clean(page) {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "no script from content ran");
  assert.deepEqual(page.problems, [], "no console errors");
}

async function shoot(page, name) {
  for (const colorScheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme });
    await page.screenshot({ path: join(artifacts, `${name}-${colorScheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: "light" });
}

/// The commit of each line, as `git blame --porcelain` finds it.
function gitBlame(rev, file) {
  const owners = [];
  for (const line of git(shop.dir, ["blame", "--porcelain", rev, "--", file]).split("\n")) {
    const f = line.split(" ");
    if (f.length >= 3 && /^[0-9a-f]{40}$/.test(f[0]) && /^\d+$/.test(f[1])) owners[Number(f[2]) - 1] = f[0];
  }
  return owners;
}

/// `git show --numstat` (renames detected, git's default) as [added, removed, old, path] rows.
function gitNumstat(sha) {
  const fields = git(shop.dir, ["show", "--numstat", "-z", "--format=", sha]).split("\0")
    .map((s) => s.replace(/^\n+/, "")).filter((s) => s !== "");
  const rows = [];
  while (fields.length) {
    const [added, removed, path] = fields.shift().split("\t");
    if (path === "") {
      const old = fields.shift();
      rows.push([added, removed, old, fields.shift()]);
    } else {
      rows.push([added, removed, null, path]);
    }
  }
  return rows;
}

test("issue 34 point 2: blame rows agree with git blame, grouped by commit, linking to commits", { timeout: 60000 }, async () => {
  const page = await watchedPage(browser);
  for (const file of ["app/shop.py", "src/lib.rs"]) {
    await page.goto(url(`blame/main/${file}`));
    const rows = await page.$$eval("table.blame tbody tr", (trs) => trs.map((tr) => tr.dataset.commit));
    assert.deepEqual(rows, gitBlame("main", file), file);
    // One group per run of lines of one commit; the commit shown once per group.
    const runs = rows.filter((c, i) => i === 0 || rows[i - 1] !== c).length;
    assert.equal(await page.locator("table.blame tr.group").count(), runs);
    assert.equal(await page.locator("table.blame td.who a.sha").count(), runs);
  }
  // app/shop.py was renamed from app/main.py by Bob: git blame (and the page) still gives its
  // unchanged lines to Ada's first commit.
  await page.goto(url("blame/main/app/shop.py"));
  const first = await page.locator("table.blame tr.group").first();
  assert.equal(await first.getAttribute("data-commit"), shop.commits[0]);
  assert.equal(await first.locator(".author").textContent(), ADA.name);
  assert.ok(await page.locator("table.blame td.line span.hl-keyword").count() > 0, "blame lines highlighted");
  assert.equal(await page.locator("#L4 td.line").textContent(), "class Cart:");
  const time = first.locator("time");
  assert.match(await time.textContent(), /ago$/);
  assert.equal(await time.getAttribute("title"), "2026-01-05 10:00:00 UTC");
  assert.equal(
    await first.locator("a.sha").getAttribute("href"),
    `/sourcegraph/repos/${repo}/-/commit/${shop.commits[0]}`,
  );
  // At a branch: the permalink is the same page at the full SHA.
  assert.equal(
    await page.locator("a[data-permalink]").getAttribute("href"),
    `/sourcegraph/repos/${repo}/-/blame/${shop.head}/app/shop.py`,
  );
  await clean(page);
  await shoot(page, "blame");
  await page.setViewportSize({ width: 360, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `blame page overflows by ${overflow}px at 360 px`);
  await page.close();
});

test("issue 34 point 3: the commits page lists what git log lists; a file's history follows its rename", { timeout: 60000 }, async () => {
  const page = await watchedPage(browser);
  await page.goto(url("commits/main"));
  const listed = await page.$$eval("ol.commits li", (lis) => lis.map((li) => li.dataset.commit));
  assert.deepEqual(listed, git(shop.dir, ["log", "--format=%H", "main"]).split("\n"));
  const subjects = await page.$$eval("ol.commits .subject", (els) => els.map((e) => e.textContent));
  assert.deepEqual(subjects, git(shop.dir, ["log", "--format=%s", "main"]).split("\n"));
  // Bob's name, with `&` and a quote, is text (git drops the name's trailing quote, as
  // `git log` shows it).
  const authors = await page.$$eval("ol.commits .byline .author", (els) => els.map((e) => e.textContent));
  assert.deepEqual(authors, git(shop.dir, ["log", "--format=%an", "main"]).split("\n"));
  assert.ok(authors[1].startsWith(BOB.name.slice(0, 10)), authors[1]);

  await page.goto(url("commits/main/app/shop.py"));
  const followed = await page.$$eval("ol.commits li", (lis) => lis.map((li) => li.dataset.commit));
  assert.deepEqual(followed, git(shop.dir, ["log", "--follow", "--format=%H", "--", "app/shop.py"]).split("\n"));
  assert.equal(followed.length, 3, "the history reaches the commit that made app/main.py");
  assert.match(await page.locator("ol.commits").textContent(), /renamed from app\/main\.py to app\/shop\.py/);
  // A path the revision no longer has (renamed away): git log -- path.
  await page.goto(url("commits/main/app/main.py"));
  const gone = await page.$$eval("ol.commits li", (lis) => lis.map((li) => li.dataset.commit));
  assert.deepEqual(gone, git(shop.dir, ["log", "--format=%H", "main", "--", "app/main.py"]).split("\n"));
  // A directory's history is git log -- dir.
  await page.goto(url("commits/main/src"));
  const dir = await page.$$eval("ol.commits li", (lis) => lis.map((li) => li.dataset.commit));
  assert.deepEqual(dir, git(shop.dir, ["log", "--format=%H", "main", "--", "src"]).split("\n"));
  await clean(page);
  await page.setViewportSize({ width: 360, height: 800 });
  await page.goto(url("commits/main/app/shop.py"));
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `history page overflows by ${overflow}px at 360 px`);
  await page.screenshot({ path: join(artifacts, "commits-360.png"), fullPage: true });
  await page.close();
});

test("issue 34 point 4: the commit page's numstat equals git show --numstat, renames included; diff lines distinct", { timeout: 60000 }, async () => {
  const page = await watchedPage(browser);
  for (const sha of shop.commits) {
    await page.goto(url(`commit/${sha}`));
    const rows = await page.$$eval("table.numstat tbody tr", (trs) => trs.map((tr) => [
      tr.querySelector("[data-added]")?.dataset.added ?? "-",
      tr.querySelector("[data-removed]")?.dataset.removed ?? "-",
      tr.querySelector("code.old-path")?.textContent ?? null,
      tr.dataset.path,
    ]));
    assert.deepEqual(rows, gitNumstat(sha), sha);
    assert.equal(await page.locator("code.full-sha").textContent(), sha);
    // The diffs are git show's files, in its order (a page holds what fits the budget; the
    // root commit is diffed against nothing).
    const diffed = await page.$$eval("details.diff-file", (els) => els.map((e) => e.dataset.path));
    const shown = git(shop.dir, ["show", "--name-only", "--format=", "-z", sha]).split("\0").filter(Boolean);
    assert.ok(diffed.length >= 1, sha);
    assert.deepEqual(diffed, shown.slice(0, diffed.length), sha);
  }
  // Bob's commit: the rename, his name and the hostile body and file name stay text.
  const bob = shop.commits[1];
  await page.goto(url(`commit/${bob}`));
  const renamed = page.locator('table.numstat tr[data-status="renamed"]');
  assert.equal(await renamed.count(), 1);
  assert.equal(await renamed.getAttribute("data-path"), "app/shop.py");
  const renamedDiff = page.locator('details.diff-file[data-path="app/shop.py"]');
  assert.equal(await renamedDiff.locator("code.old-path").textContent(), "app/main.py");
  assert.match(await renamedDiff.textContent(), /Renamed without changes/);
  assert.equal(await page.locator("dl.facts .author").textContent(), git(shop.dir, ["show", "-s", "--format=%an", bob]));
  assert.equal(await page.locator("dl.facts .committer").textContent(), git(shop.dir, ["show", "-s", "--format=%cn", bob]));
  assert.equal(await page.locator("pre.body").textContent(), `Body with ${hostile}`);
  assert.equal(await page.locator(`table.numstat tr[data-path="${HOSTILE_NAME.replace(/"/g, '\\"')}"]`).count(), 1);
  assert.equal(await page.locator("main script, main img, main em").count(), 0);
  // Parents link to their commit pages.
  assert.equal(
    await page.locator("dl.facts a.sha").first().getAttribute("href"),
    `/sourcegraph/repos/${repo}/-/commit/${shop.commits[0]}`,
  );
  await clean(page);

  // Ada's last commit: added and removed lines, numbered, in distinct colours.
  await page.goto(url(`commit/${shop.head}`));
  const file = page.locator('details.diff-file[data-path="app/shop.py"]');
  const added = await file.locator("tr.add td.line").allTextContents();
  const removed = await file.locator("tr.del td.line").allTextContents();
  assert.ok(added.includes("    def clear(self):"), added.join("|"));
  assert.ok(removed.includes("    return len(cart.items)"), removed.join("|"));
  // Both sides highlighted (Python keywords), the text unchanged by it.
  assert.ok(await file.locator("tr.add span.hl-keyword").count() > 0, "added lines highlighted");
  assert.ok(await file.locator("tr.del span.hl-keyword").count() > 0, "removed lines highlighted");
  assert.ok(await file.locator("tr.ctx span.hl-keyword").count() > 0, "context lines highlighted");
  const colours = await page.evaluate(() => ["tr.add", "tr.del", "tr.ctx"].map((s) =>
    getComputedStyle(document.querySelector(`details.diff-file ${s}`)).backgroundColor));
  assert.equal(new Set(colours).size, 3, `added, removed and context differ: ${colours}`);
  // Line numbers: the new side's number of the first added line is git's.
  const firstAdded = await file.locator("tr.add").first().locator("td.num").nth(1).textContent();
  assert.equal(firstAdded, "11");
  await clean(page);
  await shoot(page, "commit");

  // A diff larger than a page: the next page, the large file cut with a note saying so.
  await page.click('p.more a:text-is("More files")');
  const big = page.locator('details.diff-file[data-path="docs/big.txt"]');
  assert.equal(await big.count(), 1);
  assert.match(await big.locator("p.note").textContent(), /cut here/);
  assert.equal(await big.locator("tr.add").first().locator("td.line").textContent(), `line 1: ${"lorem ipsum dolor sit amet ".repeat(2)}`);
  await clean(page);
  await page.goto(url(`commit/${shop.head}`));

  // At 360 px the page does not overflow; the diff scrolls inside its box.
  await page.setViewportSize({ width: 360, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page overflows by ${overflow}px at 360 px`);
  await page.screenshot({ path: join(artifacts, "commit-360.png"), fullPage: false });
  await page.close();
});

test("issue 34 point 4: compare lists the files git diff lists, with a permalink at full SHAs", { timeout: 60000 }, async () => {
  const page = await watchedPage(browser);
  await page.goto(url("compare/v1...main"));
  const paths = await page.$$eval("details.diff-file", (els) => els.map((e) => e.dataset.path));
  const total = git(shop.dir, ["diff", "--no-renames", "--name-only", "v1", "main"]).split("\n");
  assert.deepEqual(paths, total.slice(0, paths.length));
  assert.ok(paths.length >= 1);
  if (paths.length < total.length) {
    assert.match(await page.locator("p.more").textContent(), /Showing \d+ of \d+ changed files/);
  }
  assert.equal(
    await page.locator("a[data-permalink]").getAttribute("href"),
    `/sourcegraph/repos/${repo}/-/compare/${shop.commits[1]}...${shop.head}`,
  );
  await clean(page);
  await page.close();
});
