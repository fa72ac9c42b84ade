/*
 * One source, compiled by tsc twice in decorators.test.ts: with TypeScript 5's
 * standard decorators (tsconfig.standard.json) and with experimentalDecorators
 * (tsconfig.legacy.json). Run with node, it exercises the decorated methods and
 * prints what it saw as one line of JSON for the test to check.
 */
import { createLimiter, type Decision, RateLimitedError, rateLimited } from '../../index.js';

/** The shared form: one limiter for two methods. 20 a second, one every 50 ms. */
const paced = createLimiter({ algorithm: 'gcra', limit: 20, windowMs: 1_000, burst: 1 });

export class Greeter {
  readonly seen: unknown[][] = [];
  readonly greeting: string;

  constructor(greeting: string) {
    this.greeting = greeting;
  }

  /** The owning form: its own limiter, for every instance. */
  @rateLimited({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, key: (name: string) => name })
  async greet(name: string, punctuation: string): Promise<string> {
    this.seen.push([name, punctuation]);
    return `${this.greeting}, ${name}${punctuation}`;
  }

  /** The same options as greet: a limiter of its own all the same (one per decorated method). */
  @rateLimited({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, key: (name: string) => name })
  async wave(name: string): Promise<string> {
    return `${this.greeting} waves at ${name}`;
  }

  /** Keys and cost from the arguments and `this`. */
  @rateLimited({
    rules: [
      { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
      { name: 'per-greeter', scope: 'greeter', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 },
    ],
    key(this: Greeter, user: string) {
      return { user, greeter: this.greeting };
    },
    cost: (_user: string, size: number) => size,
  })
  async upload(user: string, size: number): Promise<string> {
    return `${user} uploaded ${size}`;
  }

  @rateLimited(paced, { key: () => 'paced', wait: true })
  async patient(n: number): Promise<number> {
    return n;
  }

  @rateLimited(paced, { key: () => 'paced', wait: { maxWaitMs: 10 } })
  async hurried(n: number): Promise<number> {
    return n;
  }
}

const rejection = async (call: Promise<unknown>) => {
  try {
    await call;
    return undefined;
  } catch (error) {
    const e = error as RateLimitedError & { decision: Decision };
    return {
      name: e.name,
      code: e.code,
      isRateLimitedError: e instanceof RateLimitedError,
      status: e.status,
      retryAfterMs: e.retryAfterMs,
      rule: e.decision?.rule,
      message: e.message,
    };
  }
};

const hello = new Greeter('Hello');
const hi = new Greeter('Hi');
const results: Record<string, unknown> = {};
results.first = await hello.greet('Ada', '!');
results.second = await hi.greet('Ada', '?'); // another instance, the same method: the same limiter
results.third = await rejection(hello.greet('Ada', '.'));
results.otherKey = await hello.greet('Grace', '!');
results.seen = [hello.seen, hi.seen];
results.wave = await hello.wave('Ada');
results.upload = [await hello.upload('u1', 3), await rejection(hello.upload('u1', 3))];
const started = performance.now();
results.patient = await Promise.all([1, 2, 3, 4].map((n) => hello.patient(n)));
results.patientMs = performance.now() - started;
results.hurried = await rejection(Promise.all([hello.hurried(1), hello.hurried(2)]));
results.names = [Greeter.prototype.greet.name, Greeter.prototype.patient.name];
console.log(JSON.stringify(results));
