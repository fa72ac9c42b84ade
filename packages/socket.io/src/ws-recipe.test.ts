/*
 * The README's recipe for plain WebSockets (ws), run as written: a real http
 * server, real ws clients, limiters on an injected clock.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter } from '@floodgate/core';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { limitWebSockets } from './ws-recipe.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Opens a client: the socket once open, or the HTTP response that refused the upgrade. */
function open(url: string): Promise<{ ws: WebSocket; refused?: IncomingMessage }> {
  const ws = new WebSocket(url);
  closers.push(() => ws.terminate());
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_req, res) => resolve({ ws, refused: res }));
    ws.once('error', reject);
  });
}

const reply = async (ws: WebSocket, text: string): Promise<string> => {
  const answer = once(ws, 'message');
  ws.send(text);
  return String((await answer)[0]);
};

describe('the ws recipe', () => {
  it('is in the README as it is here', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const recipe = readFileSync(new URL('./ws-recipe.ts', import.meta.url), 'utf8');
    expect(readme).toContain(`\`\`\`ts\n${recipe}\`\`\``);
  });

  it('refuses the 3rd upgrade with 429 and Retry-After, and answers the 3rd message of a second with an error', async () => {
    let now = 5_000_000;
    const connections = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: () => now });
    const messages = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 1_000, now: () => now });
    const server = createServer();
    const wss = limitWebSockets(server, { connections, messages }, (ws, data) => ws.send(`echo:${data}`));
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    closers.push(() => wss.close());
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const { ws } = await open(url);
    expect(await reply(ws, 'a')).toBe('echo:a');
    expect(await reply(ws, 'b')).toBe('echo:b');
    now += 250;
    expect(JSON.parse(await reply(ws, 'c'))).toEqual({ error: { code: 'RATE_LIMITED', retryAfterMs: 750, rule: 'default' } });
    now += 750;
    expect(await reply(ws, 'd')).toBe('echo:d');

    expect((await open(url)).refused).toBeUndefined();
    const refused = (await open(url)).refused;
    expect(refused?.statusCode).toBe(429);
    expect(refused?.headers['retry-after']).toBe('9'); // 9 000 ms left of the 10 s window
  });
});
