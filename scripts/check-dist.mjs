#!/usr/bin/env node
// Loads every built package the way users do — `require` and `import` — and
// checks that both formats expose the same API and actually work.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const packages = {
  '@floodgate/core': ['createLimiter', 'MemoryStore', 'RedisStore', 'FloodgateError', 'RateLimitedError', 'rateLimited'],
  '@floodgate/core/adapter': ['createKeyBy', 'createRateLimitFlow', 'settleWhenDone'],
  '@floodgate/core/store': ['KeyValueStore', 'evaluate', 'decisionsOf', 'encodeEntry', 'decodeEntry'],
  '@floodgate/express': ['rateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/koa': ['rateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/hono': ['rateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/fastify': ['rateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/nestjs': ['FloodgateModule', 'RateLimit', 'SkipRateLimit', 'RateLimitedException', 'createLimiter', 'FloodgateError'],
  '@floodgate/fetch': ['withRateLimit', 'getRateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/prometheus': ['instrument'],
  '@floodgate/socket.io': ['rateLimit', 'getRateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/graphql': ['useRateLimit', 'rateLimitDirective', 'operationComplexity', 'getRateLimit', 'createLimiter', 'FloodgateError'],
  '@floodgate/otel': ['instrument'],
  '@floodgate/dashboard': ['dashboard'],
  '@floodgate/cli': ['run', 'parseDuration'],
  '@floodgate/cloudflare': ['DurableObjectStore', 'FloodgateDurableObject'],
  '@floodgate/postgres': ['PostgresStore'],
  '@floodgate/sqlite': ['SqliteStore'],
  '@floodgate/mysql': ['MySqlStore'],
  '@floodgate/trpc': ['rateLimit', 'getRateLimit', 'rateLimitData', 'createLimiter', 'FloodgateError', 'RateLimitedError'],
};
// Packages that must run on every runtime Hono supports: no Node built-in in what they load
// (packages/runtimes runs them on Bun, Deno and workerd).
const runtimeNeutral = [
  '@floodgate/core',
  '@floodgate/core/adapter',
  '@floodgate/core/store',
  '@floodgate/hono',
  '@floodgate/fetch',
  '@floodgate/cloudflare',
  '@floodgate/postgres',
  '@floodgate/sqlite',
  '@floodgate/mysql',
];

for (const [name, exports] of Object.entries(packages)) {
  // Resolve from inside the package: it sees itself (self-reference) and its dependencies.
  const require = createRequire(new URL(`../packages/${name.split('/')[1]}/package.json`, import.meta.url));
  const resolved = require.resolve(name);
  const cjs = require(resolved);
  const esm = await import(resolved.replace(/\.cjs$/, '.js'));
  for (const key of exports) {
    assert.equal(typeof cjs[key], 'function', `${name} (CJS) exports ${key}`);
    assert.equal(typeof esm[key], 'function', `${name} (ESM) exports ${key}`);
  }
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort(), `${name}: CJS and ESM export the same names`);
  console.log(`ok ${name}: CJS and ESM builds load and export ${Object.keys(esm).length} names`);
  if (runtimeNeutral.includes(name)) {
    // Every file of the build, shared chunks included: an entry imports the code it shares with the others.
    const dist = dirname(resolved);
    // But @floodgate/core/testing (testing.js, testing-worker.js), which runs in vitest on Node and spawns processes.
    for (const file of readdirSync(dist).filter((f) => /\.(c?js)$/.test(f) && !f.startsWith('testing'))) {
      const code = readFileSync(join(dist, file), 'utf8');
      const nodeImport = /(?:from\s*|require\()\s*["'](node:[^"']+|fs|path|crypto|net|http|os|events|child_process)["']/.exec(code);
      assert.equal(nodeImport, null, `${join(dist, file)} imports the Node built-in ${nodeImport?.[1]}`);
    }
    console.log(`ok ${name}: no Node built-in imported (runs on Bun, Deno, Workers)`);
  }
}

// @floodgate/core/testing is ESM only: vitest cannot be required.
const coreManifest = JSON.parse(readFileSync(new URL('../packages/core/package.json', import.meta.url), 'utf8'));
const testing = await import(new URL(`../packages/core/${coreManifest.exports['./testing'].import}`, import.meta.url).href);
assert.equal(typeof testing.storeContract, 'function', '@floodgate/core/testing (ESM) exports storeContract');
console.log('ok @floodgate/core/testing: the ESM build loads');

const require = createRequire(new URL('../packages/express/package.json', import.meta.url));

const { createLimiter } = require('@floodgate/core');
const limiter = createLimiter({ limit: 1, windowMs: 1000 });
assert.equal((await limiter.consume('k')).allowed, true);
assert.equal((await limiter.consume('k')).allowed, false);
console.log('ok the CJS build decides');

const express = require('@floodgate/express');
assert.equal(typeof express.keyBy.ip, 'function');
assert.equal(typeof express.rateLimit({ limit: 1, windowMs: 1000, key: express.keyBy.header('x-user-id') }), 'function');
console.log('ok the CJS Express adapter builds a middleware');

const fastify = createRequire(new URL('../packages/fastify/package.json', import.meta.url))('@floodgate/fastify');
assert.equal(typeof fastify.keyBy.ip, 'function');
assert.equal(fastify.rateLimit[Symbol.for('plugin-meta')]?.name, '@floodgate/fastify');
console.log('ok the CJS Fastify adapter is a fastify-plugin');
