import { describe, expect, it } from 'vitest';
import { useRateLimit } from './index.js';
import { gates, serveYoga, subscribeAll, wsClient } from './test-servers.js';

const T0 = Date.UTC(2100, 0, 1);
const frozen = () => T0;

describe('subscriptions over graphql-ws (a real ws server, the graphql-ws client)', () => {
  it('limits a subscription when it starts: an admitted one streams, a denied one gets an error message', async () => {
    const plugin = useRateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: frozen });
    const { wsUrl } = await serveYoga({ plugins: [plugin] });
    const client = wsClient(wsUrl);
    expect(await subscribeAll(client, 'subscription { ticks }')).toEqual({
      results: [{ data: { ticks: 1 } }, { data: { ticks: 2 } }, { data: { ticks: 3 } }],
    });
    // graphql-ws's `error` message: the subscription never started, and the client is told why.
    expect(await subscribeAll(client, 'subscription { ticks }')).toEqual({
      results: [],
      errors: [{ message: 'Too many requests, please try again later.', extensions: { code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' } }],
    });
    expect((await plugin.limiter.peek('127.0.0.1')).remaining).toBe(0); // keyed by the upgrade request's address
  });

  it('limits queries over the socket too, in their result', async () => {
    const { wsUrl } = await serveYoga({ plugins: [useRateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: frozen })] });
    const client = wsClient(wsUrl);
    expect(await subscribeAll(client, '{ hello }')).toEqual({ results: [{ data: { hello: 'world' } }] });
    expect(await subscribeAll(client, '{ hello }')).toEqual({
      results: [
        { errors: [{ message: 'Too many requests, please try again later.', extensions: { code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' } }] },
      ],
    });
  });

  it('holds a concurrency lease for as long as the subscription lasts', async () => {
    const plugin = useRateLimit({ algorithm: 'concurrency', limit: 1, windowMs: 600_000, now: frozen });
    const { wsUrl } = await serveYoga({ plugins: [plugin] });
    const client = wsClient(wsUrl);
    const first: unknown[] = [];
    let received: () => void = () => {};
    const receivedOne = new Promise<void>((resolve) => {
      received = resolve;
    });
    const unsubscribe = client.subscribe(
      { query: 'subscription { held }' },
      {
        next: (result) => {
          first.push(result);
          received();
        },
        error: () => {},
        complete: () => {},
      },
    );
    await receivedOne;
    expect(first).toEqual([{ data: { held: 1 } }]);
    const second = await subscribeAll(client, 'subscription { ticks }');
    expect(second.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 600_000, rule: 'default' });
    unsubscribe();
    await gates.heldEnded.promise; // the server ended the subscription's stream
    while ((await plugin.limiter.peek('127.0.0.1')).remaining === 0) await new Promise((resolve) => setImmediate(resolve)); // and then its lease
    expect((await subscribeAll(client, 'subscription { ticks }')).results).toHaveLength(3);
  });

  it('answers a bad key with the ERR_FG_* error for that subscription alone', async () => {
    const { wsUrl } = await serveYoga({
      plugins: [useRateLimit({ limit: 5, windowMs: 60_000, key: ({ operationName }) => (operationName === 'Bad' ? '' : 'good') })],
    });
    const client = wsClient(wsUrl);
    const bad = await subscribeAll(client, 'subscription Bad { ticks }');
    expect(bad.errors?.[0]?.extensions).toEqual({ code: 'ERR_FG_KEY' });
    expect((await subscribeAll(client, 'subscription Good { ticks }')).results).toHaveLength(3);
  });
});
