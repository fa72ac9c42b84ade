#!/usr/bin/env node
// The API reference: one TypeDoc run per package (docs/typedoc/<package>.json,
// each writing its JSON model), then the root typedoc.json merges them into
// docs/api. Packages are found from their configs, so a new package needs only
// its own config and its entry in typedoc.json.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const configs = readdirSync(join(root, 'docs', 'typedoc'))
  .filter((file) => file.endsWith('.json'))
  .sort();
for (const args of [...configs.map((file) => ['--options', join('docs', 'typedoc', file)]), []]) {
  const result = spawnSync('typedoc', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
