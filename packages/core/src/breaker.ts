/**
 * A circuit breaker around store calls. After `threshold` failures in a row
 * the store is not called for `cooldownMs`: decisions go straight to
 * onStoreError, so a dead store costs requests nothing instead of
 * `timeoutMs` each, and a frozen one does not pile up commands. Then one
 * call probes; its success closes the breaker, its failure opens it again.
 * It counts real time (performance.now), not the limiter's clock, which
 * tests may freeze.
 */
export class Breaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;

  constructor(
    private readonly threshold = 5,
    private readonly cooldownMs = 1_000,
  ) {}

  /** Whether to call the store now. */
  allows(): boolean {
    if (this.failures < this.threshold) return true;
    if (this.probing || performance.now() < this.openUntil) return false;
    this.probing = true;
    return true;
  }

  succeeded(): void {
    this.failures = 0;
    this.probing = false;
  }

  failed(): void {
    this.failures++;
    this.probing = false;
    if (this.failures >= this.threshold) this.openUntil = performance.now() + this.cooldownMs;
  }
}
