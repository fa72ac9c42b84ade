#!/usr/bin/env node
// Publish dry run: packs every published package (packages/*, not private) the
// way `changeset publish` does (`pnpm pack` rewrites `workspace:^` into a real
// range, which `npm pack` would leave in), installs the tarballs with npm into
// fresh apps outside the workspace, and runs the apps: what a user gets from
// the registry, before it is on the registry.
//
// One temporary project holds the install (the tarballs, the frameworks the
// packages name as peers, their @types, TypeScript); beside it, each app is a
// folder with its own package.json, so each is its own kind of app:
//   esm/          "type": "module", import
//   cjs/          CommonJS, require
//   ts-node16/    TypeScript strict, module node16, ESM
//   ts-node16-cjs TypeScript strict, module node16, CommonJS
//   ts-bundler/   TypeScript strict, moduleResolution bundler
// Every app loads every package and checks its exports; each creates a limiter
// and consumes twice (allowed, then denied) and sends two requests through the
// Express, Koa and Hono middleware (200, then 429). The TypeScript apps also
// type-check `req.rateLimit`, `ctx.state.rateLimit` and `c.get('rateLimit')`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const sh = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });

const published = readdirSync(join(root, 'packages'))
  .filter((dir) => existsSync(join(root, 'packages', dir, 'package.json')))
  .map((dir) => ({ dir: join(root, 'packages', dir), manifest: readJson(join(root, 'packages', dir, 'package.json')) }))
  .filter((p) => p.manifest.private !== true);

const work = mkdtempSync(join(tmpdir(), 'floodgate-pack-'));
const started = performance.now();
try {
  // 1. Pack, and look inside each tarball.
  const tarballs = join(work, 'tarballs');
  mkdirSync(tarballs);
  const dependencies = {};
  for (const { dir, manifest } of published) {
    const before = new Set(readdirSync(tarballs));
    sh('pnpm', ['pack', '--pack-destination', tarballs], dir);
    const tarball = join(
      tarballs,
      readdirSync(tarballs).find((f) => !before.has(f)),
    );
    const files = sh('tar', ['-tzf', tarball]).split('\n');
    for (const file of ['package/package.json', 'package/README.md', 'package/LICENSE'])
      assert.ok(files.includes(file), `${manifest.name}: the tarball has no ${file.slice(8)}`);
    const packed = sh('tar', ['-xzOf', tarball, 'package/package.json']);
    assert.ok(!packed.includes('workspace:'), `${manifest.name}: the packed package.json still has a workspace: range:\n${packed}`);
    dependencies[manifest.name] = `file:${tarball}`;
    // What a user installs beside it: the required peers, and their types when the package tests with them.
    for (const [peer, range] of Object.entries(manifest.peerDependencies ?? {})) {
      if (manifest.peerDependenciesMeta?.[peer]?.optional) continue;
      dependencies[peer] = range;
      const types = `@types/${peer.replace(/^@(.*)\//, '$1__')}`;
      if (manifest.devDependencies?.[types]) dependencies[types] = manifest.devDependencies[types];
    }
  }
  const rootDev = readJson(join(root, 'package.json')).devDependencies;
  Object.assign(dependencies, { typescript: rootDev.typescript, '@types/node': rootDev['@types/node'] });

  // 2. Install with npm, outside the workspace.
  writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'floodgate-pack-check', private: true, dependencies }, null, 2));
  sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], work);
  const lock = readJson(join(work, 'package-lock.json')).packages;
  for (const { manifest } of published) {
    const resolved = lock[`node_modules/${manifest.name}`]?.resolved ?? '';
    assert.ok(resolved.startsWith('file:'), `${manifest.name} was installed from ${resolved || 'nowhere'}, not from its tarball`);
    const copies = Object.keys(lock).filter((path) => path.endsWith(`node_modules/${manifest.name}`));
    assert.deepEqual(copies, [`node_modules/${manifest.name}`], `${manifest.name}: one copy, the tarball's`);
  }

  // 3. The apps.
  const names = published.map((p) => p.manifest.name);
  const app = (folder, pkg, files) => {
    mkdirSync(join(work, folder, 'src'), { recursive: true });
    writeFileSync(join(work, folder, 'package.json'), JSON.stringify({ private: true, ...pkg }));
    for (const [file, text] of Object.entries(files)) writeFileSync(join(work, folder, file), text);
  };
  app('esm', { type: 'module' }, { 'index.js': javascript(names, 'esm') });
  app('cjs', { type: 'commonjs' }, { 'index.js': javascript(names, 'cjs') });
  // skipLibCheck as `tsc --init` sets it: @types/koa does not compile against the content-disposition it installs.
  const tsconfig = (compilerOptions) =>
    JSON.stringify({
      compilerOptions: { strict: true, skipLibCheck: true, target: 'es2022', outDir: 'dist', rootDir: 'src', types: ['node'], ...compilerOptions },
      include: ['src'],
    });
  app('ts-node16', { type: 'module' }, { 'tsconfig.json': tsconfig({ module: 'node16', moduleResolution: 'node16' }), 'src/index.ts': typescript(names) });
  app(
    'ts-node16-cjs',
    { type: 'commonjs' },
    { 'tsconfig.json': tsconfig({ module: 'node16', moduleResolution: 'node16', esModuleInterop: true }), 'src/index.ts': typescript(names) },
  );
  app('ts-bundler', { type: 'module' }, { 'tsconfig.json': tsconfig({ module: 'esnext', moduleResolution: 'bundler' }), 'src/index.ts': typescript(names) });

  const tsc = join(work, 'node_modules', 'typescript', 'bin', 'tsc');
  for (const folder of ['esm', 'cjs', 'ts-node16', 'ts-node16-cjs', 'ts-bundler']) {
    const cwd = join(work, folder);
    try {
      if (folder.startsWith('ts-')) sh(process.execPath, [tsc, '-p', '.'], cwd);
      const out = sh(process.execPath, [folder.startsWith('ts-') ? 'dist/index.js' : 'index.js'], cwd);
      console.log(`ok ${folder}: ${out.trim().split('\n').join('; ')}`);
    } catch (error) {
      throw new Error(`the ${folder} app failed (${cwd}):\n${error.stdout ?? ''}${error.stderr ?? error.message}`);
    }
  }
  console.log(
    `publish dry run: ${published.length} packages packed, installed with npm and run in 5 apps in ${((performance.now() - started) / 1000).toFixed(0)} s`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** The JavaScript apps: the same checks, through `import` (esm) or `require` (cjs). */
function javascript(names, kind) {
  const header =
    kind === 'esm'
      ? "import assert from 'node:assert/strict';\nimport http from 'node:http';\nconst load = (name) => import(name);"
      : "const assert = require('node:assert/strict');\nconst http = require('node:http');\nconst load = async (name) => require(name);";
  return `${header}

async function main() {
  for (const name of ${JSON.stringify(names)}) {
    const m = await load(name);
    assert.ok(Object.keys(m).length > 0, name + ' exports something');
    if (typeof m.createLimiter === 'function') {
      const limiter = m.createLimiter({ limit: 1, windowMs: 60_000 });
      assert.deepEqual([(await limiter.consume('k')).allowed, (await limiter.consume('k')).allowed], [true, false], name + ': createLimiter');
    }
  }
  const framework = (m) => m.default ?? m; // a CommonJS framework imported from ESM
  const options = { limit: 1, windowMs: 60_000, key: () => 'one client' };
  const twice = async (listener) => {
    const server = http.createServer(listener);
    await new Promise((resolve) => server.listen(0, resolve));
    const url = 'http://127.0.0.1:' + server.address().port + '/';
    const statuses = [(await fetch(url)).status, (await fetch(url)).status];
    server.close();
    return statuses;
  };

  const express = framework(await load('express'));
  const expressApp = express().use((await load('@floodgate/express')).rateLimit(options));
  assert.deepEqual(await twice(expressApp.get('/', (req, res) => res.send('ok'))), [200, 429], 'Express');

  const Koa = framework(await load('koa'));
  const koaApp = new Koa().use((await load('@floodgate/koa')).rateLimit(options)).use((ctx) => { ctx.body = 'ok'; });
  assert.deepEqual(await twice(koaApp.callback()), [200, 429], 'Koa');

  const { Hono } = await load('hono');
  const honoApp = new Hono().use((await load('@floodgate/hono')).rateLimit(options)).get('/', (c) => c.text('ok'));
  assert.deepEqual([(await honoApp.request('/')).status, (await honoApp.request('/')).status], [200, 429], 'Hono');
  console.log('${names.length} packages load; limiters decide; Express, Koa and Hono answer 200 then 429');
}

main().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
`;
}

/** The TypeScript apps: the types users see, then the same run. */
function typescript(names) {
  return `import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Koa from 'koa';
import { Hono } from 'hono';
import { createLimiter, type Decision, FloodgateError } from '@floodgate/core';
import { rateLimit } from '@floodgate/express';
import { type RateLimitState, rateLimit as koaRateLimit } from '@floodgate/koa';
import { type RateLimitVariables, rateLimit as honoRateLimit } from '@floodgate/hono';
${names.map((name, i) => `import * as package${i} from '${name}';`).join('\n')}

async function main(): Promise<void> {
  for (const m of [${names.map((_, i) => `package${i}`).join(', ')}]) assert.ok(Object.keys(m).length > 0);
  const limiter = createLimiter({ limit: 1, windowMs: 60_000 });
  const first: Decision = await limiter.consume('k');
  const second: Decision = await limiter.consume('k');
  assert.deepEqual([first.allowed, second.allowed], [true, false]);
  assert.throws(() => createLimiter({ limit: 0, windowMs: 1 }), FloodgateError);
  const options = { limit: 1, windowMs: 60_000, key: () => 'one client' };
  const twice = async (server: ReturnType<typeof createServer>): Promise<number[]> => {
    await new Promise<void>((resolve) => server.listen(0, resolve));
    const url = \`http://127.0.0.1:\${(server.address() as AddressInfo).port}/\`;
    const statuses = [(await fetch(url)).status, (await fetch(url)).status];
    server.close();
    return statuses;
  };

  const app = express();
  app.get('/', rateLimit(options), (req, res) => {
    const remaining: number | undefined = req.rateLimit?.remaining;
    res.json({ remaining });
  });
  assert.deepEqual(await twice(createServer(app)), [200, 429]);

  const koa = new Koa<RateLimitState>();
  koa.use(koaRateLimit(options));
  koa.use((ctx) => {
    const decision: Decision | undefined = ctx.state.rateLimit;
    ctx.body = { remaining: decision?.remaining };
  });
  assert.deepEqual(await twice(createServer(koa.callback())), [200, 429]);

  const hono = new Hono<{ Variables: RateLimitVariables }>();
  hono.use(honoRateLimit(options));
  hono.get('/', (c) => c.json({ remaining: c.get('rateLimit').remaining }));
  assert.deepEqual([(await hono.request('/')).status, (await hono.request('/')).status], [200, 429]);
  console.log('types check; limiters decide; Express, Koa and Hono answer 200 then 429');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
`;
}
