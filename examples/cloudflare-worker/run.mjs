#!/usr/bin/env node
// Runs the Worker of wrangler.jsonc locally on workerd (the open-source runtime of Cloudflare
// Workers, from npm), as `wrangler dev` would: bundles `main` with esbuild, turns the config's
// Durable Object bindings into a workerd config, and serves it on 127.0.0.1:$PORT (8787;
// PORT=0 picks a free port). Durable Objects keep their storage in $FLOODGATE_STATE
// (.workerd-state/), so counts survive a restart. Prints `listening on <url>`.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import workerdPackage from 'workerd';

const here = dirname(fileURLToPath(import.meta.url));
// The path of the workerd binary for this platform (the package is CommonJS: its default export, seen from ESM, holds it).
const workerd = workerdPackage.default ?? workerdPackage;
/** JSON with comments, as wrangler.jsonc is: comments dropped outside strings. */
const jsonc = (text) => JSON.parse(text.replace(/("(?:\\.|[^"\\])*")|\/\/[^\n]*|\/\*[\s\S]*?\*\//g, (_, string) => string ?? ''));
const config = jsonc(readFileSync(join(here, 'wrangler.jsonc'), 'utf8'));
const out = join(here, '.workerd');
const state = resolve(process.env.FLOODGATE_STATE ?? join(here, '.workerd-state'));
mkdirSync(out, { recursive: true });
mkdirSync(state, { recursive: true });

await build({
  entryPoints: [join(here, config.main)],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  mainFields: ['module', 'main'],
  conditions: ['workerd', 'worker'],
  outfile: join(out, 'worker.js'),
  logLevel: 'warning',
});

const text = JSON.stringify;
const bindings = config.durable_objects?.bindings ?? [];
const classes = [...new Set(bindings.map((binding) => binding.class_name))];
const sqlite = new Set((config.migrations ?? []).flatMap((migration) => migration.new_sqlite_classes ?? []));
writeFileSync(
  join(out, 'config.capnp'),
  `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker), (name = "state", disk = (path = ${text(state)}, writable = true))],
  sockets = [(name = "http", address = ${text(`127.0.0.1:${process.env.PORT ?? 8787}`)}, http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker", esModule = embed "worker.js")],
  compatibilityDate = ${text(config.compatibility_date)},
  bindings = [${bindings.map((b) => `(name = ${text(b.name)}, durableObjectNamespace = (className = ${text(b.class_name)}))`).join(', ')}],
  durableObjectNamespaces = [${classes.map((c) => `(className = ${text(c)}, uniqueKey = ${text(`${config.name}-${c}`)}, enableSql = ${sqlite.has(c)})`).join(', ')}],
  durableObjectStorage = (localDisk = "state"),
);
`,
);

// workerd says on descriptor 3 which port it listens on.
const child = spawn(workerd, ['serve', join(out, 'config.capnp'), '--control-fd=3'], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] });
let said = '';
child.stdio[3].on('data', (chunk) => {
  said += chunk;
  const port = /"event":"listen","socket":"http","port":(\d+)/.exec(said)?.[1];
  if (port !== undefined && !said.includes('\u0000')) {
    said += '\u0000';
    console.log(`listening on http://127.0.0.1:${port} (Durable Objects stored in ${state})`);
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code) => process.exit(code ?? 1));
