#!/usr/bin/env node
// Runs the commands the READMEs tell users to type, on what a new user has: Node
// and npm, no pnpm. Every README promises that; `npm run demo:burst` once failed
// with "Unable to find package manager binary" because turbo looked for pnpm.
//
// Commands: the lines of every ```sh block of a README.md or docs/*.md, and the
// inline `npm run ...`/`npx ...` ones. Each runs in the README's folder, or at the
// repository root when its comment or sentence says "from the repository root".
// A command passes when it exits 0, or, for a server, once it prints
// "listening on http://..." (`next start`: "Local: http://..." then "Ready in"); then
// it is stopped. PORT=0: servers take a free port.
//
// `node scripts/check-readme-commands.mjs <text>` runs only the commands that contain <text>.
//
// pnpm is hidden: a `pnpm` that fails comes first on the PATH, the workspace's
// node_modules/.bin folders are taken off it, and the npm_*/pnpm_* variables that
// `pnpm run` sets are cleared, as in a fresh shell. scripts/bootstrap.mjs then
// has to find or install its own pnpm (into .tools/, with npm), as on a new machine.
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { markdownFiles } from './markdown-files.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

// How some commands are treated instead (add a rule when a README gains a command
// that cannot run here as it is written):
const rules = [
  { match: /^npm test$/, root: true, skip: 'the run that checks this' },
  { match: /<[^>]+>/, skip: 'a placeholder to fill in' },
  { match: /^npm install @floodgate\//, skip: 'installs published packages: scripts/check-pack.mjs installs the packed tarballs with npm' },
  { match: /render-png\.js/, skip: 'needs a Chromium (optional, as its README says)' },
  { match: /\bcurl\b/, skip: 'requests to an example started by hand' },
  { match: /^npx changeset$/, skip: 'asks questions (interactive)' },
  { match: /^npx vitest$/, smoke: 'npx vitest --version', why: 'watch mode never ends' },
  { match: /^cd packages\/\S+ && npm test$/, smoke: (c) => `${c} -- --help`, why: 'the same tests run in the test step' },
  { match: /^npm run docs$/, skip: 'typedoc only (no pnpm): the API docs step of `npm test` runs it' },
];

/** { file, line, command, cwd } for every command of a Markdown file. */
function commandsOf(file) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const found = [];
  const add = (command, text, line) => {
    const fromRoot = /from the repository root/.test(text);
    found.push({ file, line: line + 1, command, cwd: fromRoot ? root : dirname(file) });
  };
  for (let i = 0; i < lines.length; i++) {
    if (/^```(sh|bash|shell)\s*$/.test(lines[i])) {
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) {
        // A command continued over lines (a trailing backslash) is one command, on its first line.
        const first = i;
        let text = lines[i];
        while (text.endsWith('\\') && i + 1 < lines.length && !lines[i + 1].startsWith('```')) text = `${text.slice(0, -1)} ${lines[++i].trim()}`;
        const [command, comment = ''] = text.split(/\s+#\s/);
        // `[--out DIR]`: optional arguments of a usage line.
        const bare = command.replace(/\s*\[[^\]]*\]/g, '').trim();
        if (bare !== '' && !bare.startsWith('#')) add(bare, comment, first);
      }
    } else if (!lines[i].startsWith('```')) {
      for (const m of lines[i].matchAll(/`((?:npm run|npx) [^`]+)`/g)) add(m[1], lines[i], i);
    }
  }
  return found;
}

// A `pnpm` (and `pnpx`) that fails, first on the PATH.
const hidden = mkdtempSync(join(tmpdir(), 'floodgate-no-pnpm-'));
for (const name of ['pnpm', 'pnpx']) {
  writeFileSync(
    join(hidden, name),
    `#!/bin/sh\necho "${name} is hidden by check-readme-commands.mjs: README commands must work with Node and npm only" >&2\nexit 127\n`,
  );
  chmodSync(join(hidden, name), 0o755);
}
const path = (process.env.PATH ?? '').split(delimiter).filter((dir) => !dir.startsWith(root + sep) && !dir.includes(`${sep}node_modules${sep}`));
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(npm|pnpm)_/i.test(name)));
Object.assign(env, { PATH: [hidden, ...path].join(delimiter), PORT: '0', CI: '1' });

/** What a server prints once it accepts requests: ours, and `next start`'s banner. */
const serving = /listening on http:\/\/\S+|Local:\s+http:\/\/\S+[\s\S]*\bReady in\b/;

/** Runs one command in its own process group, which is stopped at the end whatever happens. */
function run(command, cwd) {
  return new Promise((resolve) => {
    const child = spawn(command, { cwd, env, shell: true, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let served = false;
    const stop = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {}
    };
    const onData = (chunk) => {
      output += chunk;
      if (!served && serving.test(output)) {
        served = true;
        stop('SIGTERM');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = setTimeout(() => {
      output += '\n(still running after 180 s: stopped)';
      stop('SIGKILL');
    }, 180_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      stop('SIGKILL'); // anything it left behind
      resolve({ ok: served || code === 0, served, output });
    });
  });
}

const seen = new Set();
let failures = 0;
const started = performance.now();
try {
  const only = process.argv[2] ?? '';
  for (const c of markdownFiles(root)
    .flatMap(commandsOf)
    .filter((c) => c.command.includes(only))) {
    const where = `${relative(root, c.file)}:${c.line}`;
    const rule = rules.find((r) => r.match.test(c.command) && (!r.root || c.cwd === root));
    if (rule?.skip) {
      console.log(`skip  ${c.command}  (${where}: ${rule.skip})`);
      continue;
    }
    const command = rule?.smoke ? (typeof rule.smoke === 'function' ? rule.smoke(c.command) : rule.smoke) : c.command;
    const id = `${relative(root, c.cwd)}$ ${command}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const t0 = performance.now();
    const { ok, served, output } = await run(command, c.cwd);
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    const how = served ? 'listening, stopped' : rule?.smoke ? `as \`${command}\`: ${rule.why}` : 'exit 0';
    if (ok) console.log(`ok    ${c.command}  (${where}; ${how}; ${seconds} s)`);
    else {
      failures++;
      console.error(`FAIL  ${c.command}  (${where}, in ${relative(root, c.cwd) || '.'}, without pnpm):\n${output.trim().split('\n').slice(-40).join('\n')}`);
    }
  }
} finally {
  rmSync(hidden, { recursive: true, force: true });
}
console.log(`README commands: ${seen.size} run without pnpm in ${((performance.now() - started) / 1000).toFixed(0)} s, ${failures} failed`);
if (failures > 0) process.exit(1);
