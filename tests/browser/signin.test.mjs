// Signing in to the website through the company's identity provider (A-6, issue 44) in a
// real browser: headless Chromium clicks "Sign in with your company account", goes through
// the provider (tests/oidc: panva's oidc-provider, which signs `alice` in by itself) and
// comes back signed in, by the same redirects, cookies and SameSite rules a person's browser
// applies; then signs out.
//
// Run: CSG_BIN=/tmp/<you>/csg timeout 300 node --test signin.test.mjs

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { root, artifacts, git, tempDir, startSite, watchedPage } from "./fixture.mjs";

const OIDC = join(root, "scripts/oidc.sh");

/// A loopback port nobody listens on now.
function freePort() {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolvePort(port));
    });
  });
}

let tmp, site, base, idpDir;

before(async () => {
  tmp = tempDir("csg-signin-");
  idpDir = join(tmp, "idp");
  const idpPort = await freePort();
  execFileSync(OIDC, ["start", idpDir, String(idpPort)], { stdio: ["ignore", "ignore", "inherit"], timeout: 120000 });
  const issuer = `http://127.0.0.1:${idpPort}`;
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // The website's confidential client, as an administrator would register it.
  const metadata = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
  const registered = await fetch(metadata.registration_endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "csg website", redirect_uris: [`${base}/sourcegraph/oauth/callback`],
      grant_types: ["authorization_code"], response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    }),
  });
  assert.equal(registered.status, 201, await registered.clone().text());
  const client = await registered.json();
  const source = join(tmp, "handbook");
  mkdirSync(source);
  git(source, ["init", "-q", "-b", "main"]);
  writeFileSync(join(source, "README.md"), "# Handbook\n");
  git(source, ["add", "."]);
  git(source, ["-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "first"]);
  site = await startSite(tmp, [source], {
    port,
    // `=`: a generated client id may start with `-`.
    args: ["--public-url", base, "--oauth-issuer", issuer, `--oauth-client-id=${client.client_id}`],
    env: { CSG_OAUTH_CLIENT_SECRET: client.client_secret },
  });
});

after(async () => {
  if (idpDir) execFileSync(OIDC, ["stop", idpDir], { stdio: "ignore", timeout: 60000 });
  await site?.stop();
});

test("signs in through the identity provider and out again (A-6)", { timeout: 120000 }, async () => {
  const page = await watchedPage(site.browser);
  await page.goto(`${base}/sourcegraph/sign-in`);
  await page.click("#provider-sign-in");
  // Through the provider and its automatic login, back to the callback, on to the list.
  await page.waitForURL(`${base}/sourcegraph/`, { timeout: 30000 });
  const signOut = page.locator('nav form button:has-text("Sign out")');
  assert.equal(await signOut.textContent(), "Sign out alice");
  // The URLs of the cookies' paths (`/sourcegraph`, the pending sign-in's `/sourcegraph/oauth`).
  const cookies = await site.browser.cookies(`${base}/sourcegraph/oauth/callback`);
  const session = cookies.find((c) => c.name === "csg_session");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  assert.ok(!cookies.some((c) => c.name === "csg_signin"), "the pending sign-in's cookie is gone");
  await page.screenshot({ path: join(artifacts, "signed-in-through-the-provider.png"), fullPage: true });
  // Reloaded, still signed in; then out.
  await page.goto(`${base}/sourcegraph/`);
  assert.equal(await signOut.textContent(), "Sign out alice");
  await signOut.click();
  await page.waitForURL(`${base}/sourcegraph/`);
  assert.equal(await page.locator('nav a:text-is("Sign in")').count(), 1);
  assert.deepEqual(page.problems, []);
  await page.close();
});
