import { buildSchema, getIntrospectionQuery, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { type ComplexityOptions, operationComplexity, useRateLimit } from './index.js';
import { query, rateLimitHeadersOf, serveYoga, testSchema } from './test-servers.js';

const schema = testSchema();
const UNBOUNDED = Number.MAX_SAFE_INTEGER;
const cost = (text: string, variables?: Record<string, unknown>, options?: ComplexityOptions) =>
  operationComplexity({ schema, document: parse(text), variables }, options);

/** `{ node { child { … { id } } } }` whose deepest field is at `depth`. */
const nested = (depth: number) => `{ node { ${'child { '.repeat(depth - 2)}id ${'} '.repeat(depth - 2)}} }`;

describe('operationComplexity()', () => {
  it('counts each selected field once, and the fields under a list as many times as first/limit say', () => {
    expect(cost('{ hello }')).toBe(1);
    expect(cost('{ hello cheap }')).toBe(2);
    // users: 1 + 10 × (name 1 + posts (1 + 5 × title 1))
    expect(cost('{ users(first: 10) { name posts(first: 5) { title } } }')).toBe(71);
    expect(cost('{ users(limit: 3) { id } }')).toBe(4);
    expect(cost('{ users(first: 0) { id name } }')).toBe(1);
  });

  it('counts a list without a list argument defaultListSize times, and __typename as nothing', () => {
    expect(cost('{ users { id } }')).toBe(2);
    expect(cost('{ users { id } }', undefined, { defaultListSize: 20 })).toBe(21);
    expect(cost('{ __typename users(first: 2) { __typename id } }')).toBe(3);
    expect(cost('{ __typename }')).toBe(1); // never less than 1: a call costs at least one unit
  });

  it('expands fragments and counts every alias', () => {
    // users: 1 + 2 × U, U = id 1 + name 1 + posts (1 + 1 × title 1) = 4
    expect(cost('{ users(first: 2) { ...U } } fragment U on User { id name posts { title } }')).toBe(9);
    expect(cost('{ users(first: 2) { ... on User { id } ...U } } fragment U on User { name }')).toBe(5);
    expect(cost('{ a: hello b: hello c: hello }')).toBe(3);
    expect(cost('{ a: users(first: 2) { id } b: users(first: 3) { id } }')).toBe(3 + 4);
  });

  it('counts every member of a union or interface (an upper bound)', () => {
    const unions = buildSchema('type Query { search: [Result!]! } union Result = A | B type A { a: Int } type B { b: Int x: Int }');
    const document = parse('{ search { __typename ... on A { a } ... on B { b x } } }');
    expect(operationComplexity({ schema: unions, document })).toBe(1 + 1 * (1 + 2));
  });

  it('reads list sizes from variables and their defaults; a size it cannot know yet counts as maxListSize', () => {
    const byVariable = 'query ($n: Int) { users(first: $n) { id } }';
    expect(cost(byVariable, { n: 7 })).toBe(8);
    expect(cost('query ($n: Int = 4) { users(first: $n) { id } }')).toBe(5);
    expect(cost('query ($n: Int = 4) { users(first: $n) { id } }', { n: 2 })).toBe(3);
    expect(cost(byVariable)).toBe(101);
    expect(cost(byVariable, { n: 'seven' })).toBe(101);
    expect(cost(byVariable, { n: null })).toBe(101);
    expect(cost(byVariable, { n: 1e12 })).toBe(101);
    expect(cost(byVariable, { n: -5 })).toBe(1);
    expect(cost('{ users(first: 2147483647) { id } }')).toBe(101);
    expect(cost('{ users(first: 2147483647) { id } }', undefined, { maxListSize: 1000 })).toBe(1001);
  });

  it('takes weights by schema coordinate, a field weight and other list arguments', () => {
    expect(cost('{ users(first: 10) { id name } }', undefined, { weights: { 'Query.users': 5, 'User.name': 0 } })).toBe(15);
    expect(cost('{ hello cheap }', undefined, { fieldWeight: 2 })).toBe(4);
    expect(cost('{ users(first: 10) { id } }', undefined, { listArguments: ['limit'] })).toBe(2);
    expect(cost('{ __typename }', undefined, { weights: { 'Query.__typename': 3 } })).toBe(3);
  });

  it('costs an operation nested deeper than maxDepth Number.MAX_SAFE_INTEGER: it can never pass', () => {
    expect(cost(nested(15))).toBe(15);
    expect(cost(nested(16))).toBe(UNBOUNDED);
    expect(cost(nested(16), undefined, { maxDepth: 16 })).toBe(16);
    expect(cost(nested(1000))).toBe(UNBOUNDED);
  });

  it('bounds hostile documents: fragments that double at each level, fragments nested 300 deep, 1000 aliases', () => {
    // F0 spreads F1 twice, F1 spreads F2 twice, ...: 2^59 copies of hello, costed in 60 steps.
    const fragments = Array.from({ length: 60 }, (_, i) =>
      i === 59 ? 'fragment F59 on Query { hello }' : `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`,
    );
    expect(cost(`{ ...F0 } ${fragments.join(' ')}`)).toBe(UNBOUNDED);
    expect(cost(`{ ${'... on Query { '.repeat(300)}hello${' }'.repeat(300)} }`)).toBe(UNBOUNDED);
    expect(cost(`{ ${'... on Query { '.repeat(200)}hello${' }'.repeat(200)} }`)).toBe(1);
    expect(cost(`{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: hello`).join(' ')} }`)).toBe(1000);
  });

  it('lets the introspection query GraphiQL sends through under the default bounds', () => {
    const introspection = cost(getIntrospectionQuery());
    expect(introspection).toBeGreaterThan(10);
    expect(introspection).toBeLessThan(1000);
  });

  it('picks the operation by name, and says when there is none', () => {
    const text = 'query A { hello } query B { users(first: 3) { id } }';
    expect(operationComplexity({ schema, document: parse(text), operationName: 'B' })).toBe(4);
    expect(() => operationComplexity({ schema, document: parse(text) })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
    expect(() => operationComplexity({ schema, document: parse(text), operationName: 'C' })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
  });
});

describe("cost: 'complexity' over HTTP", () => {
  it('takes each operation’s complexity from the limit, and denies one that can never fit with retryAfterMs null', async () => {
    const plugin = useRateLimit({ algorithm: 'fixed-window', limit: 1000, windowMs: 60_000, now: () => Date.UTC(2100, 0, 1), cost: 'complexity' });
    const { url } = await serveYoga({ plugins: [plugin] });
    const remaining = async () => (await plugin.limiter.peek('127.0.0.1')).remaining;

    const first = await query(url, '{ users(first: 10) { name posts(first: 5) { title } } }');
    expect(first.body.data.users).toHaveLength(10);
    expect(rateLimitHeadersOf(first)['x-ratelimit-remaining']).toBe('929');
    // Execution refuses 10^12 for an Int (400), after the plugin counted the operation as 101: a refused operation is paid for too.
    expect((await query(url, 'query ($n: Int) { users(first: $n) { id } }', { n: 1e12 })).status).toBe(400);
    expect(await remaining()).toBe(828);

    // 2000 aliases of one field: 2000 units, more than the limit holds.
    const aliases = await query(url, `{ ${Array.from({ length: 2000 }, (_, i) => `a${i}: hello`).join(' ')} }`);
    expect(aliases.status).toBe(429);
    expect(aliases.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: null, rule: 'default' });
    // It can never pass: no time to wait for.
    expect(rateLimitHeadersOf(aliases)).toEqual({
      'x-ratelimit-limit': '1000',
      'x-ratelimit-remaining': '828',
      'x-ratelimit-reset': String(Date.UTC(2100, 0, 1, 0, 1) / 1000),
    });
    // 300 fields deep: beyond maxDepth.
    const deep = await query(url, nested(300));
    expect(deep.status).toBe(429);
    expect(deep.body.errors[0].extensions.retryAfterMs).toBeNull();
    // Over what is left, within what a call can take: it passes once the window ends.
    const dear = await query(url, '{ users(first: 90) { name posts(first: 9) { title } } }'); // 1 + 90 × 11 = 991 > 828
    expect(dear.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' });
    expect(rateLimitHeadersOf(dear)).toMatchObject({ 'x-ratelimit-remaining': '828', 'retry-after': '60' });
    expect(await remaining()).toBe(828); // denied calls took nothing
    expect((await query(url, '{ users(first: 2147483647) { id } }')).status).toBe(200);
    expect(await remaining()).toBe(727);
  });
});
