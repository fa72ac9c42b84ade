#!/usr/bin/env node
// `node scripts/quietly.mjs <label> <command> [args...]`: runs a command with its
// output held back, and prints one line when it succeeds, or everything it printed
// when it fails. For smoke runs whose report means nothing on CI (the quick bench)
// and would bury the test counts that `npm test` ends with.
import { spawn } from 'node:child_process';

const [label, command, ...args] = process.argv.slice(2);
const started = performance.now();
const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });
const output = [];
child.stdout.on('data', (chunk) => output.push(chunk));
child.stderr.on('data', (chunk) => output.push(chunk));
child.on('error', (error) => {
  console.error(`${label}: could not start ${command}: ${error.message}`);
  process.exit(1);
});
child.on('close', (code, signal) => {
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  if (code === 0) {
    console.log(`${label}: ok (${seconds} s)`);
    return;
  }
  process.stderr.write(Buffer.concat(output));
  console.error(`${label}: failed (${signal ?? `exit code ${code}`}) after ${seconds} s`);
  process.exit(code || 1);
});
