/// <reference path="./workerd-binary.d.ts" />
/*
 * workerd (the runtime of Cloudflare Workers, from npm) for tests: a Worker
 * bundled with esbuild as wrangler bundles it, served on a free loopback
 * port, with Durable Object namespaces kept in memory or on disk, and stopped
 * by PID. The port comes from workerd's control descriptor, so nothing waits
 * on a guess.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { build } from 'esbuild';
import { afterAll, beforeAll } from 'vitest';
import workerdModule from 'workerd';

/**
 * The workerd binary's path. The package is CommonJS with an esModule default
 * export: bundlers and vitest hand over the path, Node's own ESM loader the
 * module object that holds it.
 */
const workerdBinary: string = typeof workerdModule === 'string' ? workerdModule : (workerdModule as unknown as { default: string }).default;

/** How long workerd may take to listen: a loaded machine is slow to start it. */
const STARTUP_MS = 30_000;

export interface WorkerdOptions {
  /** The Worker's entry module (TypeScript or JavaScript). */
  entry: string;
  /** Durable Object classes the entry exports, by the binding they get in `env`: `{ FLOODGATE: 'FloodgateDurableObject' }`. */
  durableObjects?: Record<string, string>;
  /** Where Durable Objects keep their storage: in memory (default), or in a directory that outlives a restart. */
  storage?: 'memory' | { dir: string };
  /** Text bindings in `env`. */
  vars?: Record<string, string>;
  /** Lets the Worker's fetch() reach loopback addresses (servers of the test, such as the REST bridge). */
  loopbackOutbound?: boolean;
  /**
   * Export conditions for the bundle. Default: the workspace packages' TypeScript sources
   * (`@floodgate/source`), as the tests of the packages use them; `[]` bundles their builds.
   */
  conditions?: string[];
  /** @defaultValue '2025-01-01' */
  compatibilityDate?: string;
  compatibilityFlags?: string[];
  /** The directory the process starts in. @defaultValue the process's own */
  cwd?: string;
}

export interface Workerd {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** The files the bundle holds (esbuild's metafile inputs). */
  readonly loaded: string[];
  /** Stops workerd (SIGKILL: no graceful shutdown, as a crash) and starts it again with the same bundle and storage, on a new port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Resolves with the first match of `pattern` in what `stream` says, or rejects when the process exits or STARTUP_MS pass. */
export function waitFor(child: ChildProcess, stream: Readable, pattern: RegExp, name: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let said = '';
    let errors = '';
    child.stderr?.on('data', (chunk) => {
      errors += chunk;
    });
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${STARTUP_MS} ms: ${said}${errors}`)), STARTUP_MS);
    stream.on('data', (chunk) => {
      said += chunk;
      const match = pattern.exec(said);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before listening: ${said}${errors}`));
    });
  });
}

/** Starts `command` in its own process group (so that wrappers and what they start stop together); `stop` kills the group. */
export function launch(command: string, args: string[], options: { cwd?: string; extraFds?: number } = {}): { child: ChildProcess; stop: () => Promise<void> } {
  const child = spawn(command, args, {
    cwd: options.cwd ?? process.cwd(),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...Array<'pipe'>(options.extraFds ?? 0).fill('pipe')],
    env: { ...process.env, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', DO_NOT_TRACK: '1' },
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(-child.pid, 'SIGKILL');
    await exited;
  };
  return { child, stop };
}

const text = (value: string) => JSON.stringify(value);

function capnpConfig(options: WorkerdOptions): string {
  const objects = Object.entries(options.durableObjects ?? {});
  const disk = typeof options.storage === 'object' ? options.storage.dir : undefined;
  const services = ['(name = "main", worker = .worker)'];
  if (options.loopbackOutbound) services.push('(name = "internet", network = (allow = ["public", "local"]))');
  if (disk !== undefined) services.push(`(name = "durable-objects", disk = (path = ${text(disk)}, writable = true))`);
  const bindings = [
    ...objects.map(([binding, className]) => `(name = ${text(binding)}, durableObjectNamespace = (className = ${text(className)}))`),
    ...Object.entries(options.vars ?? {}).map(([name, value]) => `(name = ${text(name)}, text = ${text(value)})`),
  ];
  const classes = [...new Set(objects.map(([, className]) => className))];
  const worker = [
    '  modules = [(name = "worker", esModule = embed "worker.js")],',
    `  compatibilityDate = ${text(options.compatibilityDate ?? '2025-01-01')},`,
    `  compatibilityFlags = [${(options.compatibilityFlags ?? []).map(text).join(', ')}],`,
    `  bindings = [${bindings.join(', ')}],`,
  ];
  if (classes.length > 0) {
    worker.push(
      `  durableObjectNamespaces = [${classes.map((className) => `(className = ${text(className)}, uniqueKey = ${text(`floodgate-${className}`)}, enableSql = true)`).join(', ')}],`,
      `  durableObjectStorage = ${disk === undefined ? '(inMemory = void)' : '(localDisk = "durable-objects")'},`,
    );
  }
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [${services.join(', ')}],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);
const worker :Workerd.Worker = (
${worker.join('\n')}
);
`;
}

/**
 * Bundles `options.entry` and serves it with workerd on a free loopback port.
 *
 * @example
 * ```ts
 * const worker = await startWorkerd({ entry: 'src/worker.ts', durableObjects: { FLOODGATE: 'FloodgateDurableObject' } });
 * await fetch(`${worker.url}/`);
 * await worker.stop();
 * ```
 */
export async function startWorkerd(options: WorkerdOptions): Promise<Workerd> {
  const dir = await mkdtemp(join(tmpdir(), 'floodgate-workerd-'));
  let stopCurrent: () => Promise<void> = async () => {};
  try {
    const bundle = await build({
      entryPoints: [options.entry],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      mainFields: ['module', 'main'],
      conditions: [...(options.conditions ?? ['@floodgate/source']), 'workerd', 'worker'],
      outfile: join(dir, 'worker.js'),
      metafile: true,
      logLevel: 'silent',
    });
    await writeFile(join(dir, 'config.capnp'), capnpConfig(options));
    let url = '';
    const start = async () => {
      const { child, stop } = launch(workerdBinary, ['serve', join(dir, 'config.capnp'), '--control-fd=3'], { cwd: options.cwd, extraFds: 1 });
      stopCurrent = stop;
      try {
        const [, port] = await waitFor(child, child.stdio[3] as Readable, /"event":"listen","socket":"http","port":(\d+)/, 'workerd');
        url = `http://127.0.0.1:${port}`;
      } catch (error) {
        await stop();
        throw error;
      }
    };
    await start();
    return {
      get url() {
        return url;
      },
      loaded: Object.keys(bundle.metafile.inputs),
      async restart() {
        await stopCurrent();
        await start();
      },
      async stop() {
        await stopCurrent();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await stopCurrent();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** workerd for the test file that calls this: started before its tests, stopped after them. */
export function useWorkerd(options: WorkerdOptions | (() => WorkerdOptions)): Workerd {
  let worker: Workerd | undefined;
  beforeAll(async () => {
    worker = await startWorkerd(typeof options === 'function' ? options() : options);
  }, STARTUP_MS + 10_000);
  afterAll(async () => {
    await worker?.stop();
  });
  const current = (): Workerd => {
    if (worker === undefined) throw new Error('useWorkerd(): workerd starts in beforeAll');
    return worker;
  };
  return {
    get url() {
      return current().url;
    },
    get loaded() {
      return current().loaded;
    },
    restart: () => current().restart(),
    stop: () => current().stop(),
  };
}
