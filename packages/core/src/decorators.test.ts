import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { rateLimited } from './decorators.js';
import { createLimiter } from './limiter.js';

const run = promisify(execFile);
const core = fileURLToPath(new URL('..', import.meta.url));
const fixture = fileURLToPath(new URL('./test-support/decorators/', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

describe.each([
  { mode: 'standard', helper: '__esDecorate(' },
  { mode: 'legacy', helper: '__decorate(' },
])('@rateLimited compiled by tsc with $mode decorators', ({ mode, helper }) => {
  it('limits each call before the method runs, with `this` and the arguments unchanged', async () => {
    // Inside the package, so that the compiled core finds its dependencies; node_modules keeps it out of git.
    const out = join(core, 'node_modules', '.cache', 'floodgate-decorators', mode);
    rmSync(out, { recursive: true, force: true });
    await run(process.execPath, [tsc, '-p', join(fixture, `tsconfig.${mode}.json`), '--outDir', out], { timeout: 120_000 });
    writeFileSync(join(out, 'package.json'), '{ "type": "module" }\n');
    const program = join(out, 'test-support', 'decorators', 'service.js');
    // The two modes really are different code.
    expect(readFileSync(program, 'utf8')).toContain(helper);

    const { stdout } = await run(process.execPath, [program], { timeout: 60_000 });
    const results = JSON.parse(stdout);
    rmSync(out, { recursive: true, force: true });

    expect(results.first).toBe('Hello, Ada!');
    expect(results.second).toBe('Hi, Ada?');
    // One limiter per decorated method, shared by every instance: the third call for Ada is denied.
    expect(results.third).toEqual({
      name: 'RateLimitedError',
      code: 'ERR_FG_RATE_LIMITED',
      isRateLimitedError: true,
      status: 429,
      retryAfterMs: expect.any(Number),
      rule: 'default',
      message: expect.stringMatching(/^Rate limited by rule 'default': retry in \d+ ms\. \[ERR_FG_RATE_LIMITED\]$/),
    });
    expect(results.third.retryAfterMs).toBeGreaterThan(0);
    expect(results.otherKey).toBe('Hello, Grace!');
    // A denied call never reached the method.
    expect(results.seen).toEqual([
      [
        ['Ada', '!'],
        ['Grace', '!'],
      ],
      [['Ada', '?']],
    ]);
    expect(results.wave).toBe('Hello waves at Ada'); // its own limiter: greet's count is not its count
    expect(results.upload[0]).toBe('u1 uploaded 3');
    expect(results.upload[1]).toMatchObject({ code: 'ERR_FG_RATE_LIMITED', rule: 'per-user' });
    expect(results.upload[1].message).toMatch(/^Rate limited by rule 'per-user' \(scope 'user'\): retry in \d+ ms\./);
    expect(results.patient).toEqual([1, 2, 3, 4]);
    expect(results.patientMs).toBeGreaterThanOrEqual(3 * 50 - 2); // waited its turn: one every 50 ms
    expect(results.hurried).toMatchObject({ code: 'ERR_FG_WAIT_TIMEOUT', isRateLimitedError: true });
    expect(results.names).toEqual(['greet', 'patient']);
  }, 180_000);
});

describe('rateLimited options', () => {
  it('checks its options when it is called, and names what to change', () => {
    expect(() => rateLimited({ limit: 1, windowMs: 1000 } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_KEY' }));
    expect(() => rateLimited({ limit: 1, windowMs: 1000, key: () => 'k', maxWaitMs: 5 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION', message: expect.stringContaining("rateLimited() has no option 'maxWaitMs'") }),
    );
    expect(() => rateLimited({ limit: 0, windowMs: 1000, key: () => 'k' })).toThrow(expect.objectContaining({ code: 'ERR_FG_LIMIT' }));
    expect(() => rateLimited({ limit: 1, windowMs: 1000, key: () => 'k', wait: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    const limiter = createLimiter({ limit: 1, windowMs: 1000 });
    expect(() => rateLimited(limiter, { key: () => 'k', limit: 5 } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    expect(() => (rateLimited as (...args: unknown[]) => unknown)({ limit: 1, windowMs: 1000, key: () => 'k' }, { key: () => 'k' })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION' }),
    );
  });

  it('decorates methods only', () => {
    const decorate = rateLimited({ limit: 1, windowMs: 1000, key: () => 'k' }) as unknown as (...args: unknown[]) => unknown;
    expect(() => decorate(undefined, { kind: 'field', name: 'x' })).toThrow(/decorates methods \(async ones\), not a field/);
    expect(() => decorate({}, 'x', { get: () => 1 })).toThrow(/not an accessor or a property/);
  });
});
