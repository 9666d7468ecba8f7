// A throwaway OpenID Provider for the OAuth end-to-end tests of `csg serve`: panva's
// oidc-provider on 127.0.0.1, with open dynamic client registration (the MCP SDK's client
// registers itself), PKCE S256 required, resource indicators (RFC 8707) that mint JWT access
// tokens for any http(s) resource, and no human: login and consent complete by themselves.
//
//   node provider.mjs --port N --dir DIR
//
// Issuer `http://127.0.0.1:N`. At start it makes an RS256 and an ES256 signing key and writes
// their PRIVATE JWK set to DIR/private-jwks.json, so a test can sign a token the provider never
// issued (expired, foreign audience) with a key and `kid` csg trusts. Everything else lives in
// memory and dies with the process. Prints `ready http://127.0.0.1:N` on stdout once listening;
// logs go to stderr; SIGTERM or SIGINT stops it.
//
// Test controls (loopback only, like the rest):
//   POST /test/account      {"account": "bob"} (or form or query `account=bob`): who logs in
//                           at the next login prompt (default `alice`)
//   POST /test/scope-limit  {"scopes": "csg:read"}: consent grants only these of the requested
//                           csg scopes and rejects the rest; {"scopes": ""} or no body clears it

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const ACCOUNTS = {
  alice: { groups: ['eng'] },
  bob: { groups: ['ops'] },
  carol: { groups: [] },
};
const RESOURCE_SCOPES = ['csg:read', 'csg:prepare'];
const ACCESS_TOKEN_TTL_S = 600;
const BODY_LIMIT_BYTES = 16 * 1024;

function log(message) {
  process.stderr.write(`oidc: ${message}\n`);
}

function usage(message) {
  process.stderr.write(`provider.mjs: ${message}\nusage: node provider.mjs --port N --dir DIR\n`);
  process.exit(2);
}

function parseCommandLine() {
  let values;
  try {
    ({ values } = parseArgs({
      options: { port: { type: 'string' }, dir: { type: 'string' } },
      strict: true,
    }));
  } catch (error) {
    usage(error.message);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) usage('--port must be a number from 1 to 65535');
  if (!values.dir) usage('--dir is required');
  return { port, dir: values.dir };
}

// One signing key as a private JWK with its `kid`, `alg` and `use`: oidc-provider publishes
// the public half at its jwks_uri and signs with it; the tests sign with the private half.
function signingKey(alg, kid, options) {
  const { privateKey } = crypto.generateKeyPairSync(options.type, options.params);
  return { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
}

function writePrivateJwks(dir, jwks) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'private-jwks.json');
  // Written then renamed, so a reader never sees half a key set.
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(jwks, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > BODY_LIMIT_BYTES) throw new Error('request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// A control request's parameters: the query, then a JSON or form body on top.
async function controlParams(req, url) {
  const params = Object.fromEntries(url.searchParams);
  const body = await readBody(req);
  if (body.trim() === '') return params;
  if ((req.headers['content-type'] ?? '').startsWith('application/json')) {
    const parsed = JSON.parse(body);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new Error('the JSON body must be an object');
    }
    return { ...params, ...parsed };
  }
  return { ...params, ...Object.fromEntries(new URLSearchParams(body)) };
}

function reply(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function isHttpUrl(value) {
  const url = URL.parse(value);
  return url !== null && (url.protocol === 'http:' || url.protocol === 'https:');
}

function main() {
  const { port, dir } = parseCommandLine();
  const issuer = `http://127.0.0.1:${port}`;
  const keys = [
    signingKey('RS256', `rs256-${crypto.randomUUID()}`, { type: 'rsa', params: { modulusLength: 2048 } }),
    signingKey('ES256', `es256-${crypto.randomUUID()}`, { type: 'ec', params: { namedCurve: 'P-256' } }),
  ];
  writePrivateJwks(dir, { keys });

  // What the control endpoints change: who logs in next, and which csg scopes consent grants.
  const state = { account: 'alice', scopeLimit: null };

  const provider = new Provider(issuer, {
    jwks: { keys },
    cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
    scopes: ['openid', 'profile', 'offline_access', ...RESOURCE_SCOPES],
    claims: { openid: ['sub'], profile: ['preferred_username', 'groups'] },
    pkce: { required: () => true },
    // A registered `scope` would be all a client may ever ask for, and the MCP SDK registers
    // once, with the scope of its first challenge (csg:read): its step-up to csg:prepare would
    // then be refused with invalid_scope. Registrations keep no scope, so a client may ask for
    // any scope this provider knows.
    extraClientMetadata: {
      properties: ['scope'],
      validator: (_ctx, key, _value, metadata) => {
        if (key === 'scope') delete metadata.scope;
      },
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => (Array.isArray(oneOf) ? oneOf[0] : oneOf),
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resource) => {
          if (!isHttpUrl(resource)) throw new errors.InvalidTarget('the resource must be an http(s) URL');
          return {
            scope: RESOURCE_SCOPES.join(' '),
            audience: resource,
            accessTokenFormat: 'jwt',
            accessTokenTTL: ACCESS_TOKEN_TTL_S,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    // Only the grant of this authorization's own consent: a grant an earlier authorization left
    // in the session is not reused, so the scope limit in force now decides every token (a grant
    // that rejected csg:prepare under a limit would otherwise be reused after the limit is lifted,
    // and a step-up could never get csg:prepare).
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    extraTokenClaims: async (_ctx, token) => {
      const account = token.accountId ? ACCOUNTS[token.accountId] : undefined;
      return account ? { groups: account.groups } : undefined;
    },
    findAccount: async (_ctx, sub) => {
      const account = ACCOUNTS[sub];
      if (!account) return undefined;
      return {
        accountId: sub,
        claims: async () => ({ sub, preferred_username: sub, groups: account.groups }),
      };
    },
    interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      IdToken: 600,
      RefreshToken: 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
    },
  });
  for (const event of ['server_error', 'authorization.error', 'grant.error', 'registration_create.error']) {
    provider.on(event, (_ctx, error) => log(`${event}: ${error.message}${error.error_description ? ` (${error.error_description})` : ''}`));
  }

  // Login: the current account. Consent: every requested OIDC scope and claim, and the
  // requested resource scopes within the limit (the others rejected, so the provider does not
  // ask again in a loop and the token carries what was granted).
  async function interact(req, res) {
    const interaction = await provider.interactionDetails(req, res);
    const { prompt, params, session } = interaction;
    if (prompt.name === 'login') {
      log(`login ${state.account} (client ${params.client_id})`);
      await provider.interactionFinished(req, res, { login: { accountId: state.account } }, { mergeWithLastSubmission: false });
      return;
    }
    if (prompt.name !== 'consent') throw new Error(`unexpected prompt ${prompt.name}`);
    const grant = interaction.grantId
      ? await provider.Grant.find(interaction.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const { details } = prompt;
    if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
    if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
      const granted = scopes.filter((scope) => state.scopeLimit === null || state.scopeLimit.has(scope));
      const rejected = scopes.filter((scope) => !granted.includes(scope));
      if (granted.length) grant.addResourceScope(resource, granted.join(' '));
      if (rejected.length) grant.rejectResourceScope(resource, rejected.join(' '));
      log(`consent ${session.accountId} for ${resource}: granted [${granted}] rejected [${rejected}]`);
    }
    const grantId = await grant.save();
    const consent = interaction.grantId ? {} : { grantId };
    await provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
  }

  async function control(req, res, url) {
    if (req.method !== 'POST') {
      reply(res, 405, { error: 'POST only' });
      return;
    }
    const params = await controlParams(req, url);
    if (url.pathname === '/test/account') {
      if (!Object.hasOwn(ACCOUNTS, params.account ?? '')) {
        reply(res, 400, { error: `account must be one of ${Object.keys(ACCOUNTS).join(', ')}` });
        return;
      }
      state.account = params.account;
      log(`current account: ${state.account}`);
      reply(res, 200, { account: state.account });
    } else if (url.pathname === '/test/scope-limit') {
      const scopes = String(params.scopes ?? '').split(' ').filter(Boolean);
      state.scopeLimit = scopes.length ? new Set(scopes) : null;
      log(`scope limit: ${scopes.length ? scopes.join(' ') : 'none'}`);
      reply(res, 200, { scopes: scopes.join(' ') });
    } else {
      reply(res, 404, { error: 'no such control' });
    }
  }

  const handleProvider = provider.callback();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, issuer);
    let handled;
    if (url.pathname.startsWith('/interaction/')) {
      handled = interact(req, res);
    } else if (url.pathname.startsWith('/test/')) {
      handled = control(req, res, url);
    } else {
      handleProvider(req, res);
      return;
    }
    handled.catch((error) => {
      log(`${req.method} ${url.pathname}: ${error.stack ?? error}`);
      if (!res.headersSent) reply(res, 400, { error: String(error.message ?? error) });
      else res.end();
    });
  });
  server.listen(port, '127.0.0.1', () => {
    process.stdout.write(`ready ${issuer}\n`);
  });
  server.on('error', (error) => {
    log(`cannot listen on 127.0.0.1:${port}: ${error.message}`);
    process.exit(1);
  });
  const stop = (signal) => {
    log(`${signal}: stopping`);
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main();
