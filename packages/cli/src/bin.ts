#!/usr/bin/env node
import { run } from './index.js';

run(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // Everything is closed by now and the process ends by itself; should a socket linger, it ends anyway.
  setTimeout(() => process.exit(code), 1_000).unref();
});
