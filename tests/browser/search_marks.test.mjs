// Issue 34 point 8: the search page marks exactly the query's matches in each hit, as the
// search engine found them with the regex it matched the line with (the hits carry the
// ranges; the page does not re-match), for regular expressions and literal text alike:
// compared with what `git grep -o` finds on the same lines of the code-browser repository,
// in Debian's headless Chromium against `csg serve` on 127.0.0.1.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { artifacts, git, serveCodeRepository, watchedPage } from "./fixture.mjs";

let base, browser, shop, repo;

const served = serveCodeRepository();
before(async () => {
  ({ base, browser, shop, repo } = await served.ready());
});

/// `git grep -o` at the head: `path:line` → the texts of the line's matches, in order.
function grepO(pattern, flags) {
  const out = git(shop.dir, ["grep", "-n", "-o", "-z", "-I", ...flags, "-e", pattern, shop.head]);
  const found = new Map();
  for (const record of out.split("\n").filter((r) => r.length > 0)) {
    const [name, line, text] = record.split("\0");
    const key = `${name.slice(shop.head.length + 1)}:${line}`;
    found.set(key, [...(found.get(key) ?? []), text]);
  }
  return found;
}

/// The search page for `params`, searched again until the background index answers hits;
/// answers `path:line` → the texts of the hit's `<mark>` elements, with the page.
async function searchMarks(page, params) {
  const url = `${base}/sourcegraph/search?${new URLSearchParams({ repo, ...params })}`;
  await page.goto(url);
  const hits = page.locator("section.hits li");
  for (let i = 0; i < 150 && (await hits.count()) === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await page.goto(url);
  }
  const rows = await hits.evaluateAll((items) => items.map((li) => ({
    href: li.querySelector("a")?.getAttribute("href") ?? "",
    marks: [...li.querySelectorAll("mark")].map((m) => m.textContent),
  })));
  const found = new Map();
  const prefix = `/sourcegraph/repos/${repo}/-/blob/${shop.head}/`;
  for (const { href, marks } of rows) {
    // Every line hit links to its blob page at the full SHA and line.
    const match = /^(.*)#L(\d+)$/.exec(href);
    assert.ok(match && match[1].startsWith(prefix), `hit link ${href}`);
    found.set(`${decodeURIComponent(match[1].slice(prefix.length))}:${match[2]}`, marks);
  }
  return found;
}

for (const [query, flags] of [
  ["fn \\w+", ["-P"]],
  ["\\bdef\\b", ["-P"]],
  ["^pub fn", ["-P"]],
  ["(?i)CART\\b", ["-P"]],
]) {
  test(`point 8: a regular expression's hits mark what git grep -o finds (${query})`, async () => {
    const page = await watchedPage(browser);
    const marks = await searchMarks(page, { q: query, regex: "true", case: "true" });
    const expected = grepO(query, flags);
    assert.ok(expected.size > 0, `git grep finds ${query}`);
    assert.deepEqual(marks, expected);
    assert.deepEqual(page.problems, []);
    await page.close();
  });
}

test("point 8: a literal query is still marked, case-insensitively as searched", async () => {
  const page = await watchedPage(browser);
  const marks = await searchMarks(page, { q: "ITEMS" });
  const expected = grepO("ITEMS", ["-F", "-i"]);
  assert.ok(expected.size > 2);
  assert.deepEqual(marks, expected);
  // Mixed case in the text, marked as it is written there.
  assert.ok([...marks.values()].flat().every((m) => m.toLowerCase() === "items"));
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: join(artifacts, `search-marks-${scheme}.png`), fullPage: true });
  }
  assert.deepEqual(page.problems, []);
  await page.close();
});
