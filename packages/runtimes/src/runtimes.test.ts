/*
 * The built packages (dist) on the runtimes they promise: Bun, Deno and workerd
 * (the runtime of Cloudflare Workers), each started here on a free loopback port
 * with the app in ../apps, hit over HTTP, and stopped. The binaries come from npm
 * (bun, deno, workerd); nothing is fetched from elsewhere.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { launch, startWorkerd as startWorkerdApp, waitFor } from '@floodgate/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const apps = join(root, 'apps');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
/** X-RateLimit-Reset of the apps' standing clock (2026-01-01 00:00:15): the window ends at 00:01:00. */
const RESET = String(Date.UTC(2026, 0, 1, 0, 1) / 1000);
const STARTUP_MS = 30_000;

interface Server {
  url: string;
  /** Where the app loaded each Floodgate package from. */
  loaded: string[];
  stop(): Promise<void>;
}

/** Bun and Deno print `listening on <url> <resolved packages as JSON>`. */
async function startScript(name: string, command: string, args: string[]): Promise<Server> {
  const { child, stop } = launch(command, args, { cwd: root });
  try {
    const [, url = '', loaded = '[]'] = await waitFor(child, child.stdout as Readable, /listening on (http:\/\/\S+) (\[.*\])\n/, name);
    return { url, loaded: JSON.parse(loaded), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** workerd: the worker bundled with esbuild (as wrangler does) from the built packages, served by test-support's workerd. */
async function startWorkerd(): Promise<Server> {
  const worker = await startWorkerdApp({ entry: join(apps, 'worker.ts'), conditions: [], cwd: root });
  return { url: worker.url, loaded: worker.loaded, stop: () => worker.stop() };
}

interface Runtime {
  name: string;
  start(): Promise<Server>;
  /** Headers that carry the client's address on this runtime: Cloudflare's edge sets cf-connecting-ip. */
  client(n: number): Record<string, string>;
  /** Whether another client address (by those headers) gets its own bucket: not on Bun and Deno, where every request comes from 127.0.0.1. */
  separatesClients: boolean;
}

const spoofed = (n: number) => ({ 'x-forwarded-for': `198.51.100.${n}`, 'cf-connecting-ip': `198.51.100.${n}` });
const runtimes: Runtime[] = [
  { name: 'Bun', start: () => startScript('bun', bin('bun'), [join(apps, 'bun.ts')]), client: spoofed, separatesClients: false },
  {
    name: 'Deno',
    start: () => startScript('deno', bin('deno'), ['run', '--no-lock', '--no-prompt', '--allow-net=127.0.0.1', join(apps, 'deno.ts')]),
    client: spoofed,
    separatesClients: false,
  },
  { name: 'workerd', start: startWorkerd, client: (n) => ({ 'cf-connecting-ip': `203.0.113.${n}` }), separatesClients: true },
];

const dists = ['core', 'hono', 'fetch'].map((name) => join(root, '..', name, 'dist', 'index.js'));

for (const runtime of runtimes)
  describe(runtime.name, () => {
    let server: Server;
    const get = (path: string, headers: Record<string, string> = {}, signal?: AbortSignal) => fetch(server.url + path, { headers, signal });

    beforeAll(async () => {
      const missing = dists.filter((file) => !existsSync(file));
      if (missing.length > 0)
        throw new Error(`build the packages first (pnpm turbo run build --filter @floodgate/runtime-tests^...): no ${missing.join(', ')}`);
      const started = performance.now();
      server = await runtime.start();
      console.log(`[runtimes] ${runtime.name} started in ${Math.round(performance.now() - started)} ms`);
    }, STARTUP_MS + 5_000);

    afterAll(async () => {
      await server?.stop();
    });

    it('loads the built packages', () => {
      const built = server.loaded.filter((file) => !file.includes('node_modules') && /(core|hono|fetch)\/dist\/index\.js$/.test(file));
      expect(built).toHaveLength(3);
      expect(server.loaded.filter((file) => /packages\/(core|hono|fetch)\/src\//.test(file) || /^\.\.\/(core|hono|fetch)\/src\//.test(file))).toEqual([]);
    });

    for (const [path, adapter] of [
      ['/fetch', '@floodgate/fetch'],
      ['/hono', '@floodgate/hono'],
    ] as const) {
      it(`${adapter}: admits 3 a minute per client, then answers 429 with X-RateLimit-* and Retry-After`, async () => {
        const client = runtime.client(1);
        for (const remaining of [2, 1, 0]) {
          const res = await get(path, client);
          expect(res.status).toBe(200);
          expect(await res.json()).toEqual({ runtime: runtime.name === 'workerd' ? 'workerd' : runtime.name.toLowerCase(), remaining });
          expect([res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining'), res.headers.get('x-ratelimit-reset')]).toEqual([
            '3',
            String(remaining),
            RESET,
          ]);
          expect(res.headers.get('retry-after')).toBeNull();
        }
        const denied = await get(path, client);
        expect(denied.status).toBe(429);
        expect(await denied.text()).toBe('Too many requests, please try again later.');
        expect([denied.headers.get('retry-after'), denied.headers.get('x-ratelimit-remaining'), denied.headers.get('x-ratelimit-reset')]).toEqual([
          '45',
          '0',
          RESET,
        ]);
        // Another client: its own bucket where the runtime tells clients apart, else the same one (headers cannot spoof it).
        const other = await get(path, runtime.client(2));
        await other.arrayBuffer();
        expect(other.status).toBe(runtime.separatesClients ? 200 : 429);
      });
    }

    it('@floodgate/fetch: holds the lease of a streamed response until its body ends, or the client leaves', async () => {
      const leaving = new AbortController();
      const streaming = await get('/stream?endless=1', {}, leaving.signal);
      expect(streaming.status).toBe(200);
      const reader = streaming.body?.getReader();
      expect(new TextDecoder().decode((await reader?.read())?.value)).toBe('tick\n');
      // The handler has returned, its body is still streaming: the one slot is taken.
      const busy = await get('/stream');
      expect([busy.status, await busy.text()]).toEqual([429, 'Too many requests, please try again later.']);
      leaving.abort();
      // The runtime cancels the body of a response whose client left: that ends the lease.
      const deadline = Date.now() + 10_000;
      let after = await get('/stream');
      while (after.status === 429 && Date.now() < deadline) {
        await after.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 25));
        after = await get('/stream');
      }
      expect([after.status, await after.text()]).toEqual([200, 'ab']);
      // A body read to the end ended its lease too.
      const next = await get('/stream');
      expect([next.status, await next.text()]).toEqual([200, 'ab']);
    });
  });
