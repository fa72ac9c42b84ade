#!/usr/bin/env node
// Type-checks every ```ts/```js snippet of the READMEs and docs/*.md under strict
// TypeScript against the workspace packages, and runs the JavaScript ones that
// are whole programs: a snippet users copy must compile and run as shown.
//
// Where a snippet compiles: in the package its README belongs to (packages/koa/
// README.md in packages/koa), so that it imports what that package can import
// (the package itself by name, its framework and its @types) and reads the
// workspace packages' sources (the `@floodgate/source` condition: no build
// needed to type-check). Snippets of the root README and docs/ are shown with
// Express, so they compile in packages/express. The compiler options are the
// repository's strict base, with the home's own tsconfig.json over them (NestJS
// needs legacy decorators, Next.js its bundler resolution).
//
// Fragments: a snippet may use names the surrounding app would have (`app`,
// `redis`, a route handler). scripts/snippets/<package>.d.ts declares them with
// their types; a snippet that uses none of them is a program, and a JavaScript
// program is run (node, built packages) after the type-check.
//
// An HTML comment on the line before a fence changes that, one word each:
//   <!-- snippet: koa -->                 compile in packages/koa (with koa.d.ts)
//   <!-- snippet: examples/nextjs -->     compile in that folder (a path: an example's dependencies)
//   <!-- snippet: skip: <why> -->         not checked at all (listed in the output)
//   <!-- snippet: no-run: <why> -->       type-checked, never run
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { markdownFiles } from './markdown-files.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const here = join(root, 'scripts', 'snippets');
const languages = { ts: 'ts', typescript: 'ts', js: 'js', javascript: 'js' };

function snippetsOf(file) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const snippets = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w+)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith('```'));
    if (end === -1) throw new Error(`${relative(root, file)}:${i + 1}: a code block that never ends`);
    const language = languages[open[1]];
    if (language !== undefined) {
      const marker = /^<!--\s*snippet:\s*(.*?)\s*-->$/.exec(lines[i - 1]?.trim() ?? '')?.[1] ?? '';
      const [word = '', why = ''] = marker.split(/:\s*(.*)/);
      snippets.push({ file, line: i + 2, language, code: lines.slice(i + 1, end).join('\n'), word, why });
    }
    i = end;
  }
  return snippets;
}

/** The package folder a snippet compiles in; its preamble is scripts/snippets/<folder name>.d.ts. */
function homeOf(snippet) {
  const rel = relative(root, snippet.file).split(/[\\/]/);
  if (snippet.word !== '' && snippet.word !== 'no-run') return snippet.word.includes('/') ? join(root, snippet.word) : join(root, 'packages', snippet.word);
  if (rel.length > 2 && existsSync(join(root, rel[0], rel[1], 'package.json'))) return join(root, rel[0], rel[1]);
  return join(root, 'packages', 'express');
}

const baseOptions = ts.convertCompilerOptionsFromJson(JSON.parse(readFileSync(join(root, 'tsconfig.base.json'), 'utf8')).compilerOptions, root).options;

/** The base options, then the home's tsconfig.json (its `extends` followed) without where its own files and output go. */
function optionsOf(home) {
  const config = join(home, 'tsconfig.json');
  let own = {};
  if (existsSync(config)) {
    const parsed = ts.getParsedCommandLineOfConfigFile(
      config,
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(`${relative(root, config)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
        },
      },
    );
    const { rootDir, outDir, incremental, composite, tsBuildInfoFile, plugins, ...rest } = parsed.options;
    own = rest;
  }
  return { ...baseOptions, ...own, noEmit: true, declaration: false, sourceMap: false, allowJs: true, checkJs: true };
}

const all = markdownFiles(root).flatMap(snippetsOf);
const skipped = all.filter((s) => s.word === 'skip');
const homes = new Map();
for (const s of all.filter((s) => s.word !== 'skip')) homes.set(homeOf(s), [...(homes.get(homeOf(s)) ?? []), s]);
const where = (s) => `${relative(root, s.file)}:${s.line}`;
let failures = 0;
const programs = [];

for (const [home, snippets] of homes) {
  if (!existsSync(join(home, 'package.json'))) {
    console.error(`${where(snippets[0])}: no package at ${relative(root, home)} to compile it in`);
    failures++;
    continue;
  }
  // Files inside the home package, so that module resolution starts there; removed at the end.
  const dir = join(home, '.snippets');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  const preambleSource = join(here, `${home.split(/[\\/]/).pop()}.d.ts`);
  const preamble = join(dir, 'preamble.d.ts');
  if (existsSync(preambleSource)) writeFileSync(preamble, readFileSync(preambleSource, 'utf8'));
  for (const [n, s] of snippets.entries()) {
    // .mts/.mjs: ES modules whatever the package's type, so top-level await works; `export {}` makes
    // a snippet without imports a module too, so that its names do not clash with the other snippets'.
    s.path = join(dir, `${n}-${relative(root, s.file).replace(/[\\/.]/g, '_')}-${s.line}.${s.language === 'ts' ? 'mts' : 'mjs'}`);
    writeFileSync(s.path, `${s.code}\nexport {};\n`);
  }
  const before = failures;
  const program = ts.createProgram([...snippets.map((s) => s.path), ...(existsSync(preamble) ? [preamble] : [])], optionsOf(home));
  const checker = program.getTypeChecker();
  const preambleFile = program.getSourceFile(preamble);
  for (const s of snippets) {
    const source = program.getSourceFile(s.path);
    for (const d of ts.getPreEmitDiagnostics(program, source)) {
      const { line, character } = source.getLineAndCharacterOfPosition(d.start ?? 0);
      console.error(`${relative(root, s.file)}:${s.line + line}:${character + 1} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      failures++;
    }
    // The names this snippet takes from the preamble: none makes it a program.
    s.free = new Set();
    const visit = (node) => {
      if (ts.isIdentifier(node) && checker.getSymbolAtLocation(node)?.declarations?.some((decl) => decl.getSourceFile() === preambleFile))
        s.free.add(node.text);
      ts.forEachChild(node, visit);
    };
    visit(source);
    if (s.language !== 'js' || s.free.size > 0 || s.word === 'no-run') continue;
    // Never run against whatever Redis the machine has (its 6379 may be someone's data).
    if (/from '(ioredis|redis)'/.test(s.code)) {
      console.error(`${where(s)}: a program that connects to Redis: mark it <!-- snippet: no-run: needs a Redis --> (or make it a fragment)`);
      failures++;
    } else programs.push(s);
  }
  // The preamble itself, and the options.
  for (const d of [...(preambleFile ? ts.getPreEmitDiagnostics(program, preambleFile) : []), ...program.getOptionsDiagnostics()]) {
    console.error(`${relative(root, preambleSource)}: TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    failures++;
  }
  if (failures > before)
    console.error(
      `(the snippets of ${relative(root, home)} compile in ${relative(root, dir)}, with ${relative(root, preambleSource)} for the names fragments use)`,
    );
}

/** Runs a program with the harness: servers listen on a free port, answer one request, then it exits. */
function run(s) {
  return new Promise((resolve) => {
    const harness = new URL('snippets/run-harness.mjs', import.meta.url).href;
    const child = spawn(process.execPath, ['--import', harness, s.path], { cwd: dirname(s.path), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, output: `${output}${signal ? `\n(killed by ${signal}: still running after 20 s)` : ''}` });
    });
  });
}

try {
  if (failures === 0) {
    for (const s of programs) {
      const { ok, output } = await run(s);
      if (!ok) {
        console.error(`${where(s)}: the program failed when run:\n${output.trim()}`);
        failures++;
      }
    }
  }
} finally {
  for (const home of homes.keys()) rmSync(join(home, '.snippets'), { recursive: true, force: true });
}

// The error table of the core README lists every code a FloodgateError can carry (ErrorCodes).
const codes = readFileSync(join(root, 'packages', 'core', 'src', 'errors.ts'), 'utf8').match(/'ERR_FG_[A-Z_]+'/g) ?? [];
const coreReadme = readFileSync(join(root, 'packages', 'core', 'README.md'), 'utf8');
for (const code of new Set(codes.map((c) => c.slice(1, -1)))) {
  if (!coreReadme.includes(`| \`${code}\``)) {
    console.error(`packages/core/README.md: the error table has no row for ${code} (packages/core/src/errors.ts)`);
    failures++;
  }
}

const checked = all.length - skipped.length;
const fragments = [...homes.values()].flat().filter((s) => s.free?.size > 0).length;
console.log(`snippets: ${checked} type-checked (${fragments} fragments using the preambles' names), ${programs.length} JavaScript programs run`);
for (const s of skipped) console.log(`  not checked: ${where(s)} (${s.why})`);
if (failures > 0) {
  console.error(`snippets: ${failures} problem(s)`);
  process.exit(1);
}
