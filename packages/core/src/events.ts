/**
 * A minimal typed event emitter: no dependency on node:events, so core runs
 * on every runtime Hono supports, and `has()` lets hot paths skip building
 * payloads nobody listens to.
 */
export class Emitter<Events extends { [E in keyof Events]: unknown }> {
  private readonly listeners: { [E in keyof Events]?: ((payload: Events[E]) => void)[] } = {};

  /** Calls `listener` on every `event`. Returns a function that removes it. */
  on<E extends keyof Events>(event: E, listener: (payload: Events[E]) => void): () => void {
    const list = this.listeners[event] ?? [];
    this.listeners[event] = [...list, listener];
    return () => this.off(event, listener);
  }

  off<E extends keyof Events>(event: E, listener: (payload: Events[E]) => void): void {
    const list = this.listeners[event];
    if (list !== undefined) this.listeners[event] = list.filter((l) => l !== listener);
  }

  has(event: keyof Events): boolean {
    return (this.listeners[event]?.length ?? 0) > 0;
  }

  /** Calls every listener; a listener that throws is reported and does not stop the others or the caller. */
  emit<E extends keyof Events>(event: E, payload: Events[E]): void {
    const list = this.listeners[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        listener(payload);
      } catch (error) {
        console.error(`[floodgate] a '${String(event)}' listener threw:`, error);
      }
    }
  }
}
