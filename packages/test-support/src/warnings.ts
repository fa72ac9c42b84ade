/** A FloodgateWarning as it reaches `process.on('warning')`. */
export interface CapturedWarning {
  code: string;
  message: string;
}

/**
 * Collects the FloodgateWarnings this process emits from now on, until
 * `stop()`, and keeps them off stderr meanwhile: the warning listeners already
 * there (Node's printer) are set aside and put back by `stop()`.
 * `process.emitWarning` delivers on a later tick: `taken()` waits for the
 * queue to drain, then returns what came and forgets it.
 *
 * @example
 * ```ts
 * const warnings = captureWarnings();
 * try { ...; expect(await warnings.codes()).toEqual(['WRN_FG_TRUST_PROXY']); } finally { warnings.stop(); }
 * ```
 */
export function captureWarnings(): { taken(): Promise<CapturedWarning[]>; codes(): Promise<string[]>; stop(): void } {
  let captured: CapturedWarning[] = [];
  const others = process.listeners('warning');
  const listener = (warning: Error & { code?: string }) => {
    if (warning.name === 'FloodgateWarning') captured.push({ code: String(warning.code), message: warning.message });
    else for (const other of others) other(warning);
  };
  process.removeAllListeners('warning');
  process.on('warning', listener);
  const taken = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    const all = captured;
    captured = [];
    return all;
  };
  return {
    taken,
    codes: async () => (await taken()).map((warning) => warning.code),
    stop: () => {
      process.off('warning', listener);
      for (const other of others) process.on('warning', other);
    },
  };
}
