// The Markdown files whose commands and snippets CI checks: README.md
// anywhere in the repository and every docs/*.md.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** @param {string} root the repository's root @returns {string[]} */
export function markdownFiles(root, dir = root) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...markdownFiles(root, path));
    else if (entry.name === 'README.md' || (dir === join(root, 'docs') && entry.name.endsWith('.md'))) found.push(path);
  }
  return found.sort();
}
