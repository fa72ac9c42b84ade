#!/usr/bin/env node
// CI check of the Cloudflare Worker example: run.mjs on a free loopback port, with its Durable
// Objects stored in a fresh directory. A client (by cf-connecting-ip, as Cloudflare's edge sets it)
// gets 5 requests, then 429 with Retry-After; another client has its own count; after a restart
// of the runtime the first client is still denied: the count lives in the Durable Object's storage.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listeningUrl } from '../example-test.mjs';

const state = mkdtempSync(join(tmpdir(), 'floodgate-example-state-'));
const started = performance.now();

/** Starts run.mjs; resolves with its URL and a stop function. */
async function start() {
  const child = spawn(process.execPath, ['run.mjs'], {
    env: { ...process.env, PORT: '0', FLOODGATE_STATE: state },
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(-child.pid, 'SIGKILL');
    await exited;
  };
  const url = await listeningUrl(child, 30_000).catch(async (error) => {
    await stop();
    throw error;
  });
  return { url, stop };
}

const hello = (url, ip) => fetch(new URL('/api/hello', url), { headers: { 'cf-connecting-ip': ip } });

let server = await start();
try {
  for (let i = 0; i < 5; i++) {
    const res = await hello(server.url, '203.0.113.7');
    assert.equal(res.status, 200, `request ${i + 1} of 5 is admitted`);
    assert.deepEqual(await res.json(), { hello: 'from the edge' });
    assert.equal(res.headers.get('x-ratelimit-remaining'), String(4 - i));
  }
  const denied = await hello(server.url, '203.0.113.7');
  assert.equal(denied.status, 429);
  assert.ok(Number(denied.headers.get('retry-after')) >= 1, 'Retry-After on the 429');
  await denied.arrayBuffer();
  console.log('ok a client gets 5 requests, then 429 with Retry-After');
  const other = await hello(server.url, '198.51.100.1');
  assert.equal(other.status, 200, 'another client has its own count');
  await other.arrayBuffer();

  await server.stop();
  server = await start();
  const after = await hello(server.url, '203.0.113.7');
  assert.equal(after.status, 429, 'the count survives a restart of the runtime');
  await after.arrayBuffer();
  console.log(`ok the count survives a restart: it lives in the Durable Object's storage (${Math.round(performance.now() - started)} ms)`);
} finally {
  await server.stop();
  rmSync(state, { recursive: true, force: true });
}
