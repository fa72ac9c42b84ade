/** The longest delay setTimeout keeps (2^31 - 1 ms): a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Resolves after `ms` milliseconds, however long: setTimeout fires a delay
 * above 2^31 - 1 ms after 1 ms, so a longer one is slept in pieces.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const until = performance.now() + ms;
    const next = () => {
      const left = until - performance.now();
      if (left <= 0) resolve();
      else setTimeout(next, Math.min(Math.ceil(left), MAX_TIMER_MS));
    };
    if (ms <= MAX_TIMER_MS) setTimeout(resolve, ms);
    else next();
  });
}
