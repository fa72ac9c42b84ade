/*
 * The adapter contract: one suite of HTTP tests that every adapter (Express,
 * Koa, Hono) runs against a real server it starts. Same options, same
 * statuses, same headers, byte for byte. Adapters describe how to mount a
 * route and read a request; the suite does the rest with fetch.
 */
import { describe, expect, it } from 'vitest';

/** A rule/limiter option bag as the adapters take it (typed loosely: the suite is framework-neutral). */
// biome-ignore lint/suspicious/noExplicitAny: callbacks receive each framework's own request objects.
export type Options = Record<string, any>;

export interface Route {
  path: string;
  method?: 'GET' | 'POST';
  /** rateLimit() options for this route; several entries stack several middlewares. */
  options: Options | Options[];
}

export interface Running {
  url: string;
  close(): Promise<void>;
}

/** A key function of some adapter: it reads that adapter's own request type. */
// biome-ignore lint/suspicious/noExplicitAny: each adapter's key functions read its own request type.
type AdapterKey = any;

export interface AdapterUnderTest {
  name: string;
  /** The adapter's rateLimit. */
  // biome-ignore lint/suspicious/noExplicitAny: each adapter has its own middleware type.
  rateLimit(options: Options): any;
  keyBy: {
    ip(o?: Options): AdapterKey;
    forwardedFor(o?: Options): AdapterKey;
    forwarded(o?: Options): AdapterKey;
    header(name: string, o?: Options): AdapterKey;
    cloudflare(o?: Options): AdapterKey;
    fly(o?: Options): AdapterKey;
    vercel(o?: Options): AdapterKey;
    cloudfront(o?: Options): AdapterKey;
  };
  /** createLimiter and MemoryStore from @floodgate/core (test-support cannot depend on core). */
  // biome-ignore lint/suspicious/noExplicitAny: the limiter API is exercised through HTTP only.
  createLimiter(options: Options): any;
  /**
   * Starts a server with `routes`. Each route answers with the status in the
   * `status` query parameter (default 200) and the decision as JSON (`{ skipped: true }` without one); with
   * `throw=1` its handler throws; with `hang=1` it never answers; with `wait=<ms>` it answers after that long;
   * with `hold=<name>` it answers once `held(name)` resolves, when the test lets that name go; with `used=<n>` it
   * reports that the request took n units (on its response: a header `x-used`, set before it answers).
   * `trustProxy` makes the framework trust one proxy on the loopback interface (the test itself): its client
   * address is the last X-Forwarded-For entry.
   */
  start(routes: Route[], settings?: { trustProxy?: boolean }): Promise<Running>;
  /** Reads a request header from what the adapter hands callbacks (for cost/key callbacks). */
  // biome-ignore lint/suspicious/noExplicitAny: callback arguments are the framework's own.
  header(args: any[], name: string): string | undefined;
  /** A denial handler in the adapter's signature that answers 418 with { rule, retryAfter } (the Retry-After header already set). */
  teapot: unknown;
  /** Whether the adapter sees a client abandon a request (Node's http server does; fetch-style runtimes do not). */
  seesAbandonedRequests: boolean;
  /**
   * What the route's handler reported with `used=<n>`, read from the arguments the `settle` option
   * receives (Express's `res`, Koa's `ctx`, the fetch adapter's Response, ...); undefined when nothing.
   */
  // biome-ignore lint/suspicious/noExplicitAny: settle's arguments are the framework's own.
  reported(args: any[]): string | undefined;
}

/** Requests held by name (`hold=<name>`), each name with the function that lets them go (and any later ones). */
const holds = new Map<string, { promise: Promise<void>; release: () => void; handlers: number }>();

function holdFor(name: string): { promise: Promise<void>; release: () => void; handlers: number } {
  let hold = holds.get(name);
  if (hold === undefined) {
    let release = () => {};
    const promise = new Promise<void>((resolve) => {
      release = () => resolve();
    });
    hold = { promise, release, handlers: 0 };
    holds.set(name, hold);
  }
  return hold;
}

/** What a route answering `hold=<name>` awaits: resolves once the test lets `name` go. Counts the handlers that ran into it. */
export function held(name: string): Promise<void> {
  const hold = holdFor(name);
  hold.handlers++;
  return hold.promise;
}

let holdCount = 0;

/** A new name for `hold=<name>`, the function that lets the requests held under it answer, and how many handlers it holds. */
function holdRequests(): { name: string; release: () => void; handlers: () => number } {
  const name = `hold-${holdCount++}`;
  const hold = holdFor(name);
  return { name, release: hold.release, handlers: () => hold.handlers };
}

function manualClock(start = Date.UTC(2026, 0, 1)) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/**
 * Whether `condition` stays false for `ms` of real time: the bounded check that
 * something does not happen (a lease that must not end, a refund that must not come).
 */
async function staysFalse(condition: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await condition()) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return !(await condition());
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A broken store: what a dead network store looks like to the limiter. */
const brokenStore = () => {
  const fail = () => Promise.reject(new Error('store down'));
  return { consume: fail, peek: fail, refund: fail, reset: fail };
};

export function adapterContract(adapter: AdapterUnderTest): void {
  /** Starts `routes`, runs `body`, always closes. */
  async function serve(
    routes: Route[],
    body: (get: (path: string, headers?: Record<string, string>) => Promise<Response>) => Promise<void>,
    trustProxy = false,
  ) {
    const running = await adapter.start(routes, { trustProxy });
    try {
      await body((path, headers = {}) => fetch(running.url + path, { headers, method: routes.find((r) => path.startsWith(r.path))?.method ?? 'GET' }));
    } finally {
      await running.close();
    }
  }
  const statuses = async (get: (p: string, h?: Record<string, string>) => Promise<Response>, path: string, n: number, headers?: Record<string, string>) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const res = await get(path, headers);
      await res.arrayBuffer();
      out.push(res.status);
    }
    return out;
  };

  // Only adapters that can see it (not fetch-style runtimes) register these: nothing is skipped.
  const ifAbandonedRequestsAreVisible = adapter.seesAbandonedRequests ? it : () => {};

  describe(`${adapter.name}: the adapter contract`, () => {
    it('admits the limit, then answers 429 with exact legacy headers and Retry-After', async () => {
      const clock = manualClock();
      clock.advance(15_000);
      await serve([{ path: '/a', options: { algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: clock.now } }], async (get) => {
        const first = await get('/a');
        expect(first.status).toBe(200);
        expect(await first.json()).toMatchObject({ allowed: true, remaining: 1, limit: 2, rule: 'default' });
        expect(first.headers.get('x-ratelimit-limit')).toBe('2');
        expect(first.headers.get('x-ratelimit-remaining')).toBe('1');
        expect(first.headers.get('x-ratelimit-reset')).toBe(String((Date.UTC(2026, 0, 1) + 60_000) / 1000));
        expect(first.headers.get('retry-after')).toBeNull();
        expect((await get('/a')).status).toBe(200);
        const denied = await get('/a');
        expect(denied.status).toBe(429);
        expect(await denied.text()).toBe('Too many requests, please try again later.');
        expect(denied.headers.get('content-type')).toMatch(/^text\/plain/);
        expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
        expect(denied.headers.get('retry-after')).toBe('45');
        clock.advance(45_000);
        expect((await get('/a')).status).toBe(200);
      });
    });

    it('sends draft-8 headers, both sets, or none with headers: false (Retry-After stays)', async () => {
      const clock = manualClock();
      const base = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: clock.now };
      await serve(
        [
          { path: '/draft', options: { ...base, headers: 'draft-8' } },
          { path: '/both', options: { ...base, headers: 'both' } },
          { path: '/none', options: { ...base, headers: false } },
        ],
        async (get) => {
          const draft = await get('/draft');
          expect(draft.headers.get('ratelimit-policy')).toBe('"default";q=1;w=60');
          expect(draft.headers.get('ratelimit')).toBe('"default";r=0;t=60');
          expect(draft.headers.get('x-ratelimit-limit')).toBeNull();
          const both = await get('/both');
          expect([both.headers.get('ratelimit'), both.headers.get('x-ratelimit-remaining')]).toEqual(['"default";r=0;t=60', '0']);
          const none = await get('/none');
          expect([...none.headers.keys()].filter((h) => h.includes('ratelimit'))).toEqual([]);
          const deniedNone = await get('/none');
          expect(deniedNone.status).toBe(429);
          expect(deniedNone.headers.get('retry-after')).toBe('60');
        },
      );
    });

    it('reports stacked limiters together: the most restrictive in X-RateLimit-*, every policy in RateLimit (draft-8)', async () => {
      const base = { algorithm: 'fixed-window', windowMs: 60_000, key: () => 'k' };
      await serve(
        [
          {
            path: '/legacy',
            options: [
              { ...base, limit: 100, now: manualClock().now },
              { ...base, limit: 3, now: manualClock().now },
            ],
          },
          {
            path: '/draft',
            options: [
              { ...base, limit: 100, now: manualClock().now, headers: 'draft-8' },
              { ...base, limit: 3, now: manualClock().now, headers: 'draft-8' },
            ],
          },
        ],
        async (get) => {
          const first = await get('/legacy');
          expect([first.headers.get('x-ratelimit-limit'), first.headers.get('x-ratelimit-remaining')]).toEqual(['3', '2']);
          expect(await statuses(get, '/legacy', 2)).toEqual([200, 200]);
          const denied = await get('/legacy');
          expect(denied.status).toBe(429);
          expect([denied.headers.get('x-ratelimit-limit'), denied.headers.get('x-ratelimit-remaining'), denied.headers.get('retry-after')]).toEqual([
            '3',
            '0',
            '60',
          ]);
          const draft = await get('/draft');
          // The second limiter's rule is also called 'default': it is named by its position.
          expect(draft.headers.get('ratelimit-policy')).toBe('"default";q=100;w=60, "2:default";q=3;w=60');
          expect(draft.headers.get('ratelimit')).toBe('"default";r=99;t=60, "2:default";r=2;t=60');
        },
      );
    });

    it('reports stacked limiters of different headers modes as one: every field the response carries describes the most restrictive (issue #29.6)', async () => {
      const base = { algorithm: 'fixed-window', key: () => 'k' };
      const site = { ...base, limit: 100, windowMs: 60_000 };
      const route = { ...base, limit: 3, windowMs: 10_000 };
      const routeReset = String((Date.UTC(2026, 0, 1) + 10_000) / 1000);
      /** The rate-limit fields of a response, by name. */
      const fields = (res: Response) => Object.fromEntries([...res.headers].filter(([name]) => name.includes('ratelimit') || name === 'retry-after'));
      await serve(
        [
          // examples/express-basic: the site-wide limiter sends both sets of headers, the route's the default (legacy).
          {
            path: '/both-then-legacy',
            options: [
              { ...site, headers: 'both', now: manualClock().now },
              { ...route, now: manualClock().now },
            ],
          },
          {
            path: '/legacy-then-draft',
            options: [
              { ...site, now: manualClock().now },
              { ...route, headers: 'draft-8', now: manualClock().now },
            ],
          },
        ],
        async (get) => {
          const first = await get('/both-then-legacy');
          expect(fields(first)).toEqual({
            'x-ratelimit-limit': '3',
            'x-ratelimit-remaining': '2',
            'x-ratelimit-reset': routeReset,
            'ratelimit-policy': '"default";q=100;w=60, "2:default";q=3;w=10',
            ratelimit: '"default";r=99;t=60, "2:default";r=2;t=10',
          });
          expect(await statuses(get, '/both-then-legacy', 2)).toEqual([200, 200]);
          const denied = await get('/both-then-legacy');
          expect(denied.status).toBe(429);
          // Before: the site limiter's RateLimit: "default";r=96;t=60 alone, beside the route's X-RateLimit-Remaining: 0.
          expect(fields(denied)).toEqual({
            'x-ratelimit-limit': '3',
            'x-ratelimit-remaining': '0',
            'x-ratelimit-reset': routeReset,
            'ratelimit-policy': '"default";q=100;w=60, "2:default";q=3;w=10',
            ratelimit: '"default";r=96;t=60, "2:default";r=0;t=10',
            'retry-after': '10',
          });
          // The other way round: the route's draft-8 limiter rewrites the site's X-RateLimit-* (it has fewer left).
          const admitted = await get('/legacy-then-draft');
          expect(fields(admitted)).toEqual({
            'x-ratelimit-limit': '3',
            'x-ratelimit-remaining': '2',
            'x-ratelimit-reset': routeReset,
            'ratelimit-policy': '"default";q=100;w=60, "2:default";q=3;w=10',
            ratelimit: '"default";r=99;t=60, "2:default";r=2;t=10',
          });
        },
      );
    });

    it('on a 429, draft-8 t names the moment Retry-After names (issue #29.7)', async () => {
      // A token bucket of 2 a minute, emptied: one token comes back in 30 s, the bucket is full in 60 s.
      await serve(
        [{ path: '/bucket', options: { algorithm: 'token-bucket', limit: 2, windowMs: 60_000, headers: 'draft-8', now: manualClock().now } }],
        async (get) => {
          expect(await statuses(get, '/bucket', 2)).toEqual([200, 200]);
          const denied = await get('/bucket');
          expect(denied.status).toBe(429);
          expect([denied.headers.get('ratelimit'), denied.headers.get('retry-after')]).toEqual(['"default";r=0;t=30', '30']);
        },
      );
    });

    it('answers problem+json denials (problemDetails) and sends draft-10 headers with a partition key, never the key itself', async () => {
      const base = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000, key: () => 'user-42' };
      await serve(
        [
          { path: '/problem', options: { ...base, now: manualClock().now, problemDetails: true } },
          { path: '/detail', options: { ...base, now: manualClock().now, problemDetails: true, message: 'Upgrade for more.', headers: 'draft-10' } },
        ],
        async (get) => {
          await (await get('/problem')).arrayBuffer();
          const denied = await get('/problem');
          expect(denied.status).toBe(429);
          expect(denied.headers.get('content-type')).toMatch(/^application\/problem\+json(;|$)/);
          expect(await denied.json()).toEqual({
            type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
            title: 'Quota Exceeded',
            status: 429,
            detail: 'Too many requests. Retry in 60 seconds.',
            'violated-policies': ['default'],
          });
          const first = await get('/detail');
          const policy = first.headers.get('ratelimit-policy') ?? '';
          expect(policy).toMatch(/^"default";q=1;w=60;pk=:[A-Za-z0-9+/]{16}:$/);
          expect(policy).not.toContain('user-42');
          expect(first.headers.get('ratelimit')).toMatch(/^"default";r=0;t=60;pk=:[A-Za-z0-9+/]{16}:$/);
          const detail = await get('/detail');
          expect((await detail.json()) as Options).toMatchObject({ detail: 'Upgrade for more.', 'violated-policies': ['default'] });
        },
      );
    });

    it('answers denials with statusCode and message: text, JSON, a function of the request, or a handler', async () => {
      const base = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: manualClock().now };
      await serve(
        [
          { path: '/text', options: { ...base, statusCode: 503, message: 'Slow down' } },
          { path: '/json', options: { ...base, message: { error: 'rate_limited' } } },
          { path: '/fn', options: { ...base, message: async (...args: unknown[]) => ({ tenant: adapter.header(args, 'x-tenant') ?? null }) } },
          { path: '/handler', options: { ...base, handler: adapter.teapot } },
        ],
        async (get) => {
          for (const path of ['/text', '/json', '/fn', '/handler']) await (await get(path)).arrayBuffer();
          const text = await get('/text');
          expect([text.status, await text.text()]).toEqual([503, 'Slow down']);
          // A 503 the user chose is a rate-limit denial like any other: the real wait, and the numbers.
          expect(text.headers.get('retry-after')).toBe('60');
          expect(text.headers.get('x-ratelimit-remaining')).toBe('0');
          const json = await get('/json');
          expect(json.status).toBe(429);
          expect(json.headers.get('content-type')).toMatch(/^application\/json/);
          expect(await json.json()).toEqual({ error: 'rate_limited' });
          expect(await (await get('/fn', { 'x-tenant': 'acme' })).json()).toEqual({ tenant: 'acme' });
          const teapot = await get('/handler');
          expect(teapot.status).toBe(418);
          expect(await teapot.json()).toEqual({ rule: 'default', retryAfter: '60' });
        },
      );
    });

    it('skips requests for which skip() is true', async () => {
      await serve(
        [{ path: '/a', options: { limit: 1, windowMs: 60_000, skip: (...args: unknown[]) => adapter.header(args, 'x-internal') === 'yes' } }],
        async (get) => {
          const skipped = await get('/a', { 'x-internal': 'yes' });
          expect(skipped.status).toBe(200);
          expect(skipped.headers.get('x-ratelimit-limit')).toBeNull();
          expect(await statuses(get, '/a', 2, { 'x-internal': 'yes' })).toEqual([200, 200]);
          expect(await statuses(get, '/a', 2)).toEqual([200, 429]);
        },
      );
    });

    it('charges the cost: a number, or a function of the request; a cost above the capacity gets no Retry-After', async () => {
      await serve(
        [
          { path: '/fixed', options: { limit: 10, windowMs: 60_000, cost: 4 } },
          {
            path: '/sized',
            options: {
              algorithm: 'token-bucket',
              limit: 10,
              windowMs: 60_000,
              cost: (...args: unknown[]) => Number(adapter.header(args, 'x-mb')),
              now: manualClock().now, // the bucket refills a unit per 6 s of the limiter's clock: it stands still here
            },
          },
        ],
        async (get) => {
          expect((await get('/fixed')).headers.get('x-ratelimit-remaining')).toBe('6');
          expect((await get('/sized', { 'x-mb': '6' })).headers.get('x-ratelimit-remaining')).toBe('4');
          expect((await get('/sized', { 'x-mb': '5' })).status).toBe(429);
          expect((await get('/sized', { 'x-mb': '4' })).status).toBe(200);
          const never = await get('/sized', { 'x-mb': '11' });
          expect(never.status).toBe(429);
          expect(never.headers.get('retry-after')).toBeNull();
        },
      );
    });

    it('answers 500 for a key function returning "" or a bad cost, and keeps serving', async () => {
      await serve(
        [
          { path: '/empty-key', options: { limit: 5, windowMs: 60_000, key: () => '' } },
          { path: '/bad-cost', options: { limit: 5, windowMs: 60_000, cost: () => 1.5 } },
          { path: '/throwing-key', options: { limit: 5, windowMs: 60_000, key: () => Promise.reject(new Error('no session store')) } },
          { path: '/fine', options: { limit: 5, windowMs: 60_000 } },
        ],
        async (get) => {
          expect((await get('/empty-key')).status).toBe(500);
          expect((await get('/bad-cost')).status).toBe(500);
          expect((await get('/throwing-key')).status).toBe(500);
          expect((await get('/fine')).status).toBe(200);
        },
      );
    });

    it('skipSuccessfulRequests counts only responses >= 400', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: manualClock().now });
      await serve([{ path: '/a', options: { limiter, skipSuccessfulRequests: true, key: () => 'k' } }], async (get) => {
        expect(await statuses(get, '/a', 4)).toEqual([200, 200, 200, 200]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 2);
        expect(await statuses(get, '/a?status=404', 1)).toEqual([404]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 1);
        expect(await statuses(get, '/a?throw=1', 1)).toEqual([500]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 0);
        expect(await statuses(get, '/a', 1)).toEqual([429]);
      });
    });

    it('skipFailedRequests counts only responses < 400', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: manualClock().now });
      await serve([{ path: '/a', options: { limiter, skipFailedRequests: true, key: () => 'k' } }], async (get) => {
        expect(await statuses(get, '/a?status=500', 3)).toEqual([500, 500, 500]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 2);
        expect(await statuses(get, '/a', 3)).toEqual([200, 200, 429]);
      });
    });

    /** A settle function that reads what the route reported (`used=<n>`): undefined when it reported nothing. */
    const settleReported = (...args: unknown[]) => {
      const used = adapter.reported(args);
      return used === undefined ? undefined : Number(used);
    };

    it("settles the cost once the response is over (issue #30.6): the estimate first, in this response's headers, then what the handler reported", async () => {
      const clock = manualClock();
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: clock.now });
      await serve([{ path: '/chat', options: { limiter, key: () => 'k', cost: 10, settle: settleReported } }], async (get) => {
        const remaining = async (path: string) => {
          const res = await get(path);
          await res.arrayBuffer();
          return [res.status, res.headers.get('x-ratelimit-remaining')];
        };
        expect(await remaining('/chat?used=4')).toEqual([200, '90']); // the estimate: the units used are not known yet
        await waitFor(async () => (await limiter.peek('k')).remaining === 96);
        expect(await remaining('/chat?used=30')).toEqual([200, '86']); // the last request settled: 4 for its 10
        await waitFor(async () => (await limiter.peek('k')).remaining === 66);
        expect(await remaining('/chat')).toEqual([200, '56']); // nothing reported: the estimate stands
        expect(await staysFalse(async () => (await limiter.peek('k')).remaining !== 56, 100)).toBe(true);
        // More than the key has left: taken as far as the rule has it, and the next request waits for the window.
        expect(await remaining('/chat?used=500')).toEqual([200, '46']);
        await waitFor(async () => (await limiter.peek('k')).remaining === 0);
        const denied = await get('/chat');
        expect([denied.status, denied.headers.get('retry-after')]).toEqual([429, '60']);
        clock.advance(60_000);
        expect(await remaining('/chat?used=10')).toEqual([200, '90']); // a new window: nothing owed from the last
      });
    });

    it('settle: skipFailedRequests wins, stacked limiters settle their own, a concurrency lease ends as before', async () => {
      const tokens = adapter.createLimiter({ algorithm: 'fixed-window', limit: 1_000, windowMs: 60_000, now: manualClock().now });
      const calls = adapter.createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: manualClock().now, prefix: 'calls:' });
      const leased = adapter.createLimiter({
        prefix: 'leased:',
        now: manualClock().now,
        rules: [
          { name: 'tokens', algorithm: 'fixed-window', limit: 1_000, windowMs: 60_000 },
          { name: 'in-flight', algorithm: 'concurrency', limit: 500, windowMs: 60_000 },
        ],
      });
      const key = () => 'k';
      await serve(
        [
          {
            path: '/stacked',
            options: [
              { limiter: calls, key, cost: 5, settle: () => 1 },
              { limiter: tokens, key, cost: 100, settle: settleReported, skipFailedRequests: true },
            ],
          },
          { path: '/leased', options: { limiter: leased, key, cost: 100, settle: settleReported } },
        ],
        async (get) => {
          expect(await statuses(get, '/stacked?used=40', 1)).toEqual([200]);
          await waitFor(async () => (await tokens.peek('k')).remaining === 960 && (await calls.peek('k')).remaining === 99);
          // A failed answer is given back whole by the limiter with skipFailedRequests; the other settles as ever.
          expect(await statuses(get, '/stacked?used=40&status=502', 1)).toEqual([502]);
          await waitFor(async () => (await calls.peek('k')).remaining === 98);
          expect(await staysFalse(async () => (await tokens.peek('k')).remaining !== 960, 100)).toBe(true);
          expect(await statuses(get, '/leased?used=250', 1)).toEqual([200]);
          await waitFor(async () => {
            const rules = (await leased.peek('k')).rules.map((r: { name: string; remaining: number }) => [r.name, r.remaining]);
            return (
              JSON.stringify(rules) ===
              JSON.stringify([
                ['tokens', 750],
                ['in-flight', 500],
              ])
            );
          });
        },
      );
    });

    it("settle: a function that throws or returns no unit count is ERR_FG_COST on the limiter's error event; the response and the estimate stand", async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: manualClock().now });
      const errors: { operation: string; error: { code?: string } }[] = [];
      limiter.on('error', (event: { operation: string; error: { code?: string } }) => errors.push(event));
      const base = { limiter, key: () => 'k', cost: 10 };
      await serve(
        [
          {
            path: '/throws',
            options: {
              ...base,
              settle: () => {
                throw new Error('no usage in the answer');
              },
            },
          },
          { path: '/rejects', options: { ...base, settle: () => Promise.reject(new Error('no usage in the answer')) } },
          { path: '/negative', options: { ...base, settle: () => -3 } },
          { path: '/text', options: { ...base, settle: () => '12' } },
          { path: '/fraction', options: { ...base, settle: () => 2.5 } },
        ],
        async (get) => {
          for (const path of ['/throws', '/rejects', '/negative', '/text', '/fraction']) expect(await statuses(get, `${path}?used=1`, 1)).toEqual([200]);
          await waitFor(async () => errors.length === 5);
          expect(errors.map((e) => [e.operation, e.error.code])).toEqual(Array(5).fill(['settle', 'ERR_FG_COST']));
          expect((await limiter.peek('k')).remaining).toBe(50);
        },
      );
    });

    it('settles a request whose client left mid-response with what its handler reported', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: manualClock().now });
      const running = await adapter.start([{ path: '/chat', options: { limiter, key: () => 'k', cost: 10, settle: settleReported } }]);
      const hold = holdRequests();
      try {
        const controller = new AbortController();
        const pending = fetch(`${running.url}/chat?hold=${hold.name}&used=70`, { signal: controller.signal }).catch(() => 'aborted');
        await waitFor(async () => hold.handlers() === 1);
        controller.abort();
        expect(await pending).toBe('aborted');
        expect((await limiter.peek('k')).remaining).toBe(90);
        hold.release(); // the handler answers, to nobody, and reports 70 units
        await waitFor(async () => (await limiter.peek('k')).remaining === 30);
      } finally {
        hold.release();
        await running.close();
      }
    });

    ifAbandonedRequestsAreVisible('judges an abandoned request by how its handler ends, not by the client leaving', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: manualClock().now });
      const running = await adapter.start([
        { path: '/slow', options: { limiter, skipFailedRequests: true, key: (...args: unknown[]) => adapter.header(args, 'x-k') } },
      ]);
      const hold = holdRequests();
      const abandon = async (key: string, query: string) => {
        const controller = new AbortController();
        const pending = fetch(`${running.url}/slow?${query}`, { signal: controller.signal, headers: { 'x-k': key } }).catch(() => 'aborted');
        await waitFor(async () => (await limiter.peek(key)).remaining === 0);
        controller.abort();
        expect(await pending).toBe('aborted');
      };
      try {
        // The client leaves while its handler still runs: that is no failed request, and no free one.
        await abandon('ok', `hold=${hold.name}`);
        await abandon('failing', `hold=${hold.name}&status=500`);
        await abandon('hanging', 'hang=1');
        expect(await staysFalse(async () => (await limiter.peek('ok')).remaining > 0 || (await limiter.peek('failing')).remaining > 0, 300)).toBe(true);
        const next = await fetch(`${running.url}/slow`, { headers: { 'x-k': 'hanging' } });
        expect(next.status).toBe(429);
        // Once the handlers answer, the one that failed gives its unit back; the one that succeeded does not.
        hold.release();
        await waitFor(async () => (await limiter.peek('failing')).remaining === 1);
        expect(await staysFalse(async () => (await limiter.peek('ok')).remaining > 0, 100)).toBe(true);
        expect((await limiter.peek('hanging')).remaining).toBe(0);
      } finally {
        hold.release();
        await running.close();
      }
    });

    it('shadow mode decides, sets headers and emits events, but never denies', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: manualClock().now });
      const limited: string[] = [];
      limiter.on('limited', (e: { key: string }) => limited.push(e.key));
      await serve([{ path: '/a', options: { limiter, shadow: true, key: () => 'k' } }], async (get) => {
        expect((await get('/a')).status).toBe(200);
        const over = await get('/a');
        expect(over.status).toBe(200);
        expect(await over.json()).toMatchObject({ allowed: false, remaining: 0 });
        expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
        expect(over.headers.get('retry-after')).toBeNull();
        expect(limited).toEqual(['k']);
      });
    });

    it('serves allow-listed clients unlimited and answers deny-listed ones 403 without asking the store (CIDR lists or functions)', async () => {
      const limiter = adapter.createLimiter({ limit: 1, windowMs: 60_000, store: brokenStore(), onStoreError: 'deny' });
      limiter.on('error', () => {});
      const loopback = ['127.0.0.0/8', '::1']; // a client at ::ffff:127.0.0.1 counts as 127.0.0.1
      await serve(
        [
          { path: '/allowed', options: { limit: 1, windowMs: 60_000, allowList: loopback } },
          { path: '/denied', options: { limiter, denyList: loopback, handler: adapter.teapot } },
          {
            path: '/by-header',
            options: { limit: 1, windowMs: 60_000, denyList: (...args: unknown[]) => adapter.header(args, 'x-banned') === '1', allowList: ['10.0.0.0/8'] },
          },
        ],
        async (get) => {
          const allowed = await statuses(get, '/allowed', 3);
          expect(allowed).toEqual([200, 200, 200]);
          expect((await get('/allowed')).headers.get('x-ratelimit-limit')).toBeNull();
          const denied = await get('/denied');
          expect([denied.status, await denied.text(), denied.headers.get('retry-after')]).toEqual([403, 'Forbidden', null]);
          expect(await statuses(get, '/by-header', 1, { 'x-banned': '1' })).toEqual([403]);
          expect(await statuses(get, '/by-header', 2)).toEqual([200, 429]);
        },
      );
      expect(() => adapter.rateLimit({ limit: 1, windowMs: 1, allowList: ['10.0.0.0/33'] })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      expect(() => adapter.rateLimit({ limit: 1, windowMs: 1, denyList: 'localhost' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    });

    it('limits requests in flight with a concurrency rule, and ends each lease when its response ends', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'concurrency', limit: 2, windowMs: 60_000 });
      await serve([{ path: '/slow', options: { limiter, key: () => 'k' } }], async (get) => {
        // The first two are held until the third has been answered: three in flight, however slow the machine.
        const hold = holdRequests();
        const first = await Promise.all(
          [0, 1, 2].map(async (i) => {
            if (i < 2) return (await get(`/slow?hold=${hold.name}`)).status;
            try {
              await waitFor(async () => (await limiter.peek('k')).remaining === 0);
              return (await get('/slow')).status;
            } finally {
              hold.release();
            }
          }),
        );
        expect(first).toEqual([200, 200, 429]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 2); // both leases ended with their responses
        expect(await statuses(get, '/slow?throw=1', 1)).toEqual([500]);
        await waitFor(async () => (await limiter.peek('k')).remaining === 2); // a failed response ends its lease too
        expect((await Promise.all([get('/slow?wait=50'), get('/slow?wait=50')])).map((r) => r.status)).toEqual([200, 200]);
      });
    });

    ifAbandonedRequestsAreVisible('holds the lease of an abandoned request until its handler is done: leaving frees no slot', async () => {
      const limiter = adapter.createLimiter({ algorithm: 'concurrency', limit: 2, windowMs: 60_000 });
      const running = await adapter.start([{ path: '/slow', options: { limiter, key: () => 'k' } }]);
      const hold = holdRequests();
      try {
        // Each client leaves once its request is admitted; with leases ended on disconnect, every
        // next request would be admitted and run its handler: twenty clients, nineteen handlers at once.
        const statuses: (number | string)[] = [];
        for (let i = 0; i < 6; i++) {
          const controller = new AbortController();
          const pending = fetch(`${running.url}/slow?hold=${hold.name}`, { signal: controller.signal }).then(
            async (res) => {
              await res.arrayBuffer();
              return res.status;
            },
            () => 'aborted',
          );
          // Leave once the request was either answered or admitted (its handler runs into the hold).
          const before = hold.handlers();
          let answered: number | string | undefined;
          void pending.then((status) => {
            answered = status;
          });
          await waitFor(async () => answered !== undefined || hold.handlers() > before);
          controller.abort();
          statuses.push(await pending);
          if (i === 1) expect(await staysFalse(async () => (await limiter.peek('k')).remaining > 0, 300)).toBe(true);
        }
        expect(statuses).toEqual(['aborted', 'aborted', 429, 429, 429, 429]);
        expect(hold.handlers()).toBe(2);
        hold.release();
        await waitFor(async () => (await limiter.peek('k')).remaining === 2);
        expect((await fetch(`${running.url}/slow`)).status).toBe(200);
      } finally {
        hold.release();
        await running.close();
      }
    });

    it('does not let a spoofed X-Forwarded-For change the key while proxies are not trusted', async () => {
      // A client sends X-Forwarded-For itself: the xForwardedFor warning's false alarm, which it says to turn off.
      await serve([{ path: '/a', options: { limit: 2, windowMs: 60_000, validate: { xForwardedFor: false } } }], async (get) => {
        const rotating = [];
        for (let i = 0; i < 4; i++) {
          const res = await get('/a', { 'x-forwarded-for': `198.51.100.${i}` });
          await res.arrayBuffer();
          rotating.push(res.status);
        }
        expect(rotating).toEqual([200, 200, 429, 429]);
      });
    });

    it('puts IPv6 addresses of one /56 in one bucket, and IPv4-mapped IPv6 with plain IPv4', async () => {
      await serve(
        [{ path: '/a', options: { limit: 1, windowMs: 60_000 } }],
        async (get) => {
          expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '2001:db8:1234:5601::1' })).toEqual([200]);
          expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '2001:db8:1234:56ff:abcd::9' })).toEqual([429]);
          expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '2001:db8:1234:5700::1' })).toEqual([200]);
          expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '::ffff:203.0.113.7' })).toEqual([200]);
          expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '203.0.113.7' })).toEqual([429]);
        },
        true,
      );
    });

    it('keyBy.forwardedFor({ hops }) takes the entry your proxies appended', async () => {
      await serve([{ path: '/a', options: { limit: 1, windowMs: 60_000, key: adapter.keyBy.forwardedFor({ hops: 2 }) } }], async (get) => {
        expect(await statuses(get, '/a', 1, { 'x-forwarded-for': 'spoof-1, 198.51.100.1, 10.0.0.1' })).toEqual([200]);
        expect(await statuses(get, '/a', 1, { 'x-forwarded-for': 'spoof-2, 198.51.100.1, 10.0.0.1' })).toEqual([429]);
        expect(await statuses(get, '/a', 1, { 'x-forwarded-for': '198.51.100.2, 10.0.0.1' })).toEqual([200]);
        expect(await statuses(get, '/a', 1)).toEqual([200]); // no header: the socket address
      });
    });

    it('keyBy presets key by the platform header, port dropped, and answer 500 for a request that did not come through the platform', async () => {
      const routes = [
        { path: '/cf', options: { limit: 1, windowMs: 60_000, key: adapter.keyBy.cloudflare() } },
        { path: '/cloudfront', options: { limit: 1, windowMs: 60_000, key: adapter.keyBy.cloudfront() } },
        { path: '/forwarded', options: { limit: 1, windowMs: 60_000, key: adapter.keyBy.forwarded() } },
      ];
      await serve(routes, async (get) => {
        expect(await statuses(get, '/cf', 1, { 'cf-connecting-ip': '203.0.113.7' })).toEqual([200]);
        expect(await statuses(get, '/cf', 1, { 'cf-connecting-ip': '::ffff:203.0.113.7' })).toEqual([429]);
        expect(await statuses(get, '/cf', 1, { 'x-forwarded-for': '203.0.113.8' })).toEqual([500]);
        expect(await statuses(get, '/cloudfront', 1, { 'cloudfront-viewer-address': '2001:db8:1234:5601::1:46532' })).toEqual([200]);
        expect(await statuses(get, '/cloudfront', 1, { 'cloudfront-viewer-address': '[2001:db8:1234:56ff::9]:443' })).toEqual([429]);
        expect(await statuses(get, '/forwarded', 1, { forwarded: 'for=spoof, for="198.51.100.1:4711";proto=https' })).toEqual([200]);
        expect(await statuses(get, '/forwarded', 1, { forwarded: 'for=198.51.100.1' })).toEqual([429]);
      });
    });

    it('keyBy.header() limits per user and falls back to the client IP when the header is missing', async () => {
      await serve([{ path: '/a', options: { limit: 1, windowMs: 60_000, key: adapter.keyBy.header('x-user-id') } }], async (get) => {
        expect(await statuses(get, '/a', 2, { 'x-user-id': 'alice' })).toEqual([200, 429]);
        expect(await statuses(get, '/a', 1, { 'x-user-id': 'bob' })).toEqual([200]);
        expect(await statuses(get, '/a', 2)).toEqual([200, 429]);
      });
    });

    it('applies options per route, and shares one limiter between routes', async () => {
      const shared = adapter.createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: manualClock().now });
      await serve(
        [
          { path: '/one', options: { limiter: shared } },
          { path: '/two', options: { limiter: shared } },
          { path: '/own', options: { limit: 5, windowMs: 60_000 } },
        ],
        async (get) => {
          expect(await statuses(get, '/one', 1)).toEqual([200]);
          expect(await statuses(get, '/two', 1)).toEqual([200]);
          expect(await statuses(get, '/one', 1)).toEqual([429]);
          expect(await statuses(get, '/two', 1)).toEqual([429]);
          expect((await get('/own')).headers.get('x-ratelimit-remaining')).toBe('4');
        },
      );
    });

    it('takes one key function per scope: a global rule, a per-IP rule and a per-user rule in one call, all or nothing', async () => {
      await serve(
        [
          {
            path: '/orders',
            options: {
              now: manualClock().now,
              key: { ip: adapter.keyBy.ip(), user: (...args: unknown[]) => adapter.header(args, 'x-user') ?? 'anonymous' },
              rules: [
                { name: 'all', scope: 'global', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
                { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 50, windowMs: 60_000 },
                { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
              ],
            },
          },
          // A key function may also return the object of keys itself.
          {
            path: '/object',
            options: {
              now: manualClock().now,
              key: (...args: unknown[]) => ({ user: adapter.header(args, 'x-user') ?? 'anonymous', key: 'ignored by these rules' }),
              rules: [{ name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }],
            },
          },
        ],
        async (get) => {
          const as = async (user: string) => {
            const res = await get('/orders', { 'x-user': user });
            return { status: res.status, body: (await res.json().catch(() => undefined)) as Options };
          };
          const first = await as('a');
          expect(first.status).toBe(200);
          expect(first.body.rules.map((r: { name: string; scope: string; remaining: number }) => [r.name, r.scope, r.remaining])).toEqual([
            ['all', 'global', 4],
            ['per-ip', 'ip', 49],
            ['per-user', 'user', 1],
          ]);
          expect((await as('a')).status).toBe(200);
          // The per-user rule denies: nothing is taken from the global or per-IP budgets.
          expect((await as('a')).status).toBe(429);
          expect([(await as('b')).status, (await as('b')).status, (await as('c')).status]).toEqual([200, 200, 200]);
          const full = await get('/orders', { 'x-user': 'd' });
          expect(full.status).toBe(429);
          expect(full.headers.get('x-ratelimit-limit')).toBe('5');
          expect(full.headers.get('retry-after')).toBe('60');
          expect(await statuses(get, '/object', 2, { 'x-user': 'a' })).toEqual([200, 429]);
          expect(await statuses(get, '/object', 1, { 'x-user': 'b' })).toEqual([200]);
        },
      );
    });

    it('takes limit and rules as functions of the request (plans): counts carry over a plan change, headers report the limit in force', async () => {
      const free = [{ name: 'per-minute', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }];
      const pro = [{ name: 'per-minute', algorithm: 'fixed-window', limit: 4, windowMs: 60_000 }];
      const plan = (...args: unknown[]) => adapter.header(args, 'x-plan');
      const user = (...args: unknown[]) => adapter.header(args, 'x-user') ?? 'anonymous';
      const shared = adapter.createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: manualClock().now });
      await serve(
        [
          {
            path: '/limit',
            options: {
              algorithm: 'fixed-window',
              windowMs: 60_000,
              now: manualClock().now,
              key: user,
              limit: (...a: unknown[]) => (plan(...a) === 'pro' ? 4 : 2),
            },
          },
          {
            path: '/async',
            options: { algorithm: 'fixed-window', windowMs: 60_000, key: user, limit: async (...a: unknown[]) => (plan(...a) === 'pro' ? 4 : 2) },
          },
          { path: '/rules', options: { now: manualClock().now, key: user, rules: (...a: unknown[]) => (plan(...a) === 'pro' ? pro : free) } },
          { path: '/shared', options: { limiter: shared, key: user, limit: (...a: unknown[]) => (plan(...a) === 'pro' ? 3 : 1) } },
          { path: '/zero', options: { windowMs: 60_000, limit: () => 0 } },
        ],
        async (get) => {
          for (const path of ['/limit', '/async', '/rules']) {
            const limits: (string | null)[] = [];
            const codes: number[] = [];
            for (const tier of ['free', 'free', 'free', 'pro', 'pro', 'pro']) {
              const res = await get(path, { 'x-user': 'u1', 'x-plan': tier });
              await res.arrayBuffer();
              codes.push(res.status);
              limits.push(res.headers.get('x-ratelimit-limit'));
            }
            // Two on the free plan, the third denied (not counted); on pro the same count goes on to 4.
            expect([path, codes]).toEqual([path, [200, 200, 429, 200, 200, 429]]);
            expect([path, limits]).toEqual([path, ['2', '2', '2', '4', '4', '4']]);
            expect(await statuses(get, path, 1, { 'x-user': 'u2', 'x-plan': 'free' })).toEqual([200]);
          }
          expect(await statuses(get, '/shared', 2, { 'x-user': 'u1' })).toEqual([200, 429]);
          expect(await statuses(get, '/shared', 3, { 'x-user': 'u1', 'x-plan': 'pro' })).toEqual([200, 200, 429]);
          expect((await get('/zero')).status).toBe(500);
        },
      );
    });

    it('SMS: 1/minute, 5/hour, 10/day per phone number on one route, naming the rule that binds', async () => {
      const clock = manualClock();
      const phone = (...args: unknown[]) => `phone:${adapter.header(args, 'x-phone')}`;
      await serve(
        [
          {
            path: '/sms',
            method: 'POST',
            options: {
              now: clock.now,
              key: phone,
              headers: 'draft-8',
              rules: [
                { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
                { name: 'per-hour', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
                { name: 'per-day', algorithm: 'fixed-window', limit: 10, windowMs: 86_400_000 },
              ],
            },
          },
        ],
        async (get) => {
          const send = async (number = '+15550100') => {
            const res = await get('/sms', { 'x-phone': number });
            const body = await res.text();
            return { status: res.status, policy: res.headers.get('ratelimit-policy'), retryAfter: res.headers.get('retry-after'), body };
          };
          expect((await send()).status).toBe(200);
          expect(await send()).toMatchObject({ status: 429, policy: '"per-minute";q=1;w=60', retryAfter: '60' });
          expect((await send('+15550199')).status).toBe(200);
          for (let i = 0; i < 4; i++) {
            clock.advance(60_000);
            expect((await send()).status).toBe(200);
          }
          clock.advance(60_000);
          expect(await send()).toMatchObject({ status: 429, policy: '"per-hour";q=5;w=3600' });
          clock.advance(3_600_000);
          for (let i = 0; i < 5; i++) {
            expect((await send()).status).toBe(200);
            clock.advance(60_000);
          }
          clock.advance(3_600_000);
          expect(await send()).toMatchObject({ status: 429, policy: '"per-day";q=10;w=86400' });
        },
      );
    });

    it('delays requests in leaky-bucket shape mode, at a constant rate', async () => {
      // The limiter's clock stands still, so the four arrive at one instant however slow the machine is;
      // the waits the middleware imposes are real.
      const options = { algorithm: 'leaky-bucket', mode: 'shape', limit: 10, windowMs: 1000, burst: 3, key: () => 'k', now: manualClock().now };
      await serve([{ path: '/a', options }], async (get) => {
        const started = performance.now();
        const done: number[] = [];
        const results = await Promise.all(
          [0, 1, 2, 3].map(async () => {
            const res = await get('/a');
            await res.arrayBuffer();
            done.push(performance.now() - started);
            return res.status;
          }),
        );
        expect(results.sort()).toEqual([200, 200, 200, 429]);
        expect(Math.max(...done)).toBeGreaterThanOrEqual(190); // the third waited two emission intervals of 100 ms
      });
    });

    it('fails the way onStoreError says: 503 + Retry-After: 1 without numbers (deny), or serves (allow)', async () => {
      const deny = adapter.createLimiter({ limit: 5, windowMs: 60_000, store: brokenStore(), onStoreError: 'deny' });
      const allow = adapter.createLimiter({ limit: 5, windowMs: 60_000, store: brokenStore() });
      deny.on('error', () => {});
      allow.on('error', () => {});
      await serve(
        [
          { path: '/deny', options: { limiter: deny } },
          { path: '/allow', options: { limiter: allow } },
        ],
        async (get) => {
          const denied = await get('/deny');
          expect(denied.status).toBe(503);
          expect(denied.headers.get('retry-after')).toBe('1');
          expect(denied.headers.get('x-ratelimit-limit')).toBeNull();
          const allowed = await get('/allow');
          expect(allowed.status).toBe(200);
          expect(allowed.headers.get('x-ratelimit-limit')).toBeNull();
        },
      );
    });

    it('rejects bad options when the middleware is built, with ERR_FG_* codes', () => {
      expect(() => adapter.rateLimit({ max: 5, windowMs: 1000 })).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, headers: 'draft-9' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, statusCode: 200 })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      expect(() => adapter.rateLimit({ limit: 0, windowMs: 1000 })).toThrow(expect.objectContaining({ code: 'ERR_FG_LIMIT' }));
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, cost: 0 })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, key: 'ip' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      expect(() => adapter.rateLimit({ limiter: adapter.createLimiter({ limit: 1, windowMs: 1 }), limit: 5 })).toThrow(
        expect.objectContaining({ code: 'ERR_FG_OPTION' }),
      );
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, key: { ip: 'ip' } })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      expect(() => adapter.rateLimit({ limit: 5, windowMs: 1000, key: {} })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
      const twoRules = adapter.createLimiter({
        rules: [
          { name: 'a', limit: 1, windowMs: 1000 },
          { name: 'b', limit: 2, windowMs: 2000 },
        ],
      });
      // Which of the two would a limit function replace? rules: (req) => [...] says it.
      expect(() => adapter.rateLimit({ limiter: twoRules, limit: () => 5 })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    });
  });
}
