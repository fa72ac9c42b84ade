#!/usr/bin/env node
// Fails when a package's sources import each other in a circle (madge), types
// included: layers that only look down keep the house easy to see (issue #27).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import madge from 'madge';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..');
let cycles = 0;
for (const name of readdirSync(join(root, 'packages')).sort()) {
  const dir = join(root, 'packages', name);
  if (!existsSync(join(dir, 'src')) || !existsSync(join(dir, 'tsconfig.json'))) continue;
  const result = await madge(join(dir, 'src'), { fileExtensions: ['ts'], tsConfig: join(dir, 'tsconfig.json') });
  for (const cycle of result.circular()) {
    cycles++;
    console.error(`packages/${name}/src: ${cycle.join(' > ')}`);
  }
}
if (cycles > 0) {
  console.error(`import cycles: ${cycles} (move the shared part to a module both can import)`);
  process.exit(1);
}
console.log('import cycles: none');
