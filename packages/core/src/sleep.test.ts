import { afterEach, describe, expect, it, vi } from 'vitest';
import { sleep } from './sleep.js';

describe('sleep', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // Node fires a setTimeout above 2^31 - 1 ms after 1 ms: a real run of the bug would need 25 days, so the clock is faked.
  it('sleeps delays above setTimeout’s limit (2^31 - 1 ms) in full, not for 1 ms', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
    let done = false;
    const delay = 2 ** 31 + 5000;
    void sleep(delay).then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(1000);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(2 ** 31 - 1000);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(4999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
  });

  it('sleeps short delays with one timer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
    let done = false;
    void sleep(250).then(() => {
      done = true;
    });
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(249);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
  });
});
