import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createTRPCClient, createWSClient, TRPCClientError, wsLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { applyWSSHandler, type CreateWSSContextFnOptions } from '@trpc/server/adapters/ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { rateLimit, rateLimitData } from './index.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 10);

/** The WebSocket adapter's context: the upgrade request (for the client address) and the socket, which has no headers to set. */
const t = initTRPC.context<Pick<CreateWSSContextFnOptions, 'req' | 'res'>>().create({
  errorFormatter: ({ shape, error }) => ({ ...shape, data: { ...shape.data, ...rateLimitData(error) } }),
});

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** A tRPC WebSocket server on a free port, and a client's connection to it. */
async function connect(router: Parameters<typeof applyWSSHandler>[0]['router']) {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await once(wss, 'listening');
  applyWSSHandler({ wss, router, createContext: ({ req, res }) => ({ req, res }) });
  const ws = createWSClient({ url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, WebSocket: WebSocket as never });
  cleanups.push(async () => {
    await ws.close();
    for (const socket of wss.clients) socket.terminate();
    await new Promise((resolve) => wss.close(resolve));
  });
  return ws;
}

type Denial = Error & { data: Record<string, unknown> };

/** A subscription's first value, or the error it failed with, and how to end it. */
function subscribe(start: (handlers: { onData(value: unknown): void; onError(error: unknown): void }) => { unsubscribe(): void }) {
  let unsubscribe = () => {};
  const first = new Promise<{ data?: unknown; error?: Denial }>((resolve) => {
    unsubscribe = start({ onData: (data) => resolve({ data }), onError: (error) => resolve({ error: error as never }) }).unsubscribe;
  });
  return { first, unsubscribe: () => unsubscribe() };
}

/** Ticks until the client goes: a subscription that holds its lease while it lasts. */
async function* ticks({ signal }: { signal?: AbortSignal }) {
  yield 'tick';
  await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
}

describe('subscriptions', () => {
  it('are limited when they start, keyed by the address of the upgrade request', async () => {
    const limited = rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 });
    const router = t.router({ feed: t.procedure.use(limited).subscription(ticks) });
    const trpc = createTRPCClient<typeof router>({ links: [wsLink({ client: await connect(router) })] });
    const subscriptions = [0, 1, 2].map(() => subscribe((handlers) => trpc.feed.subscribe(undefined, handlers)));
    const [first, second, third] = await Promise.all(subscriptions.map((s) => s.first));
    expect([first?.data, second?.data]).toEqual(['tick', 'tick']);
    expect(third?.error).toBeInstanceOf(TRPCClientError);
    expect(third?.error?.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', retryAfterMs: 50_000, rule: 'default' });
    expect((await limited.limiter.peek('127.0.0.1')).remaining).toBe(0);
    for (const s of subscriptions) s.unsubscribe();
  });

  it('hold a concurrency lease as long as they last', async () => {
    const limited = rateLimit({ algorithm: 'concurrency', limit: 1, windowMs: 60_000, now: () => T0 });
    const router = t.router({ feed: t.procedure.use(limited).subscription(ticks) });
    const trpc = createTRPCClient<typeof router>({ links: [wsLink({ client: await connect(router) })] });

    const open = subscribe((handlers) => trpc.feed.subscribe(undefined, handlers));
    expect((await open.first).data).toBe('tick');
    const refused = subscribe((handlers) => trpc.feed.subscribe(undefined, handlers));
    expect((await refused.first).error?.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', rule: 'default' });

    open.unsubscribe();
    // The server ends the subscription once the client's stop arrives: the lease goes with it.
    await vi.waitFor(async () => expect((await limited.limiter.peek('127.0.0.1')).remaining).toBe(1), { timeout: 2_000, interval: 5 });
    const next = subscribe((handlers) => trpc.feed.subscribe(undefined, handlers));
    expect((await next.first).data).toBe('tick');
    next.unsubscribe();
  });
});
