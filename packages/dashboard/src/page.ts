import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Answer } from './http.js';

/** The page's files, served as they are in assets/ (no build step). */
const files = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
} as const;

// The page talks to its own origin only, and no other site may frame its buttons.
const policy =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** Reads the page's files once; answers a GET of one of their paths. */
export function loadPage(): (path: string) => (Answer & { text: string }) | undefined {
  const assets = new URL('../assets/', import.meta.url);
  const loaded = new Map(
    Object.entries(files).map(([path, { file, type }]) => [path, { type, text: readFileSync(fileURLToPath(new URL(file, assets)), 'utf8') }]),
  );
  return (path) => {
    const found = loaded.get(path === '/index.html' ? '/' : path);
    if (found === undefined) return undefined;
    return {
      status: 200,
      text: found.text,
      headers: {
        'content-type': found.type,
        'content-security-policy': policy,
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
      },
    };
  };
}
