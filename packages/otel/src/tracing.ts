import type { Decision } from '@floodgate/core';
import { type Attributes, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { decisionAttributes, ERROR_TYPE, errorType, LIMITER, OPERATION, type StoreOperation } from './attributes.js';

/** Now, in epoch ms with the sub-millisecond part (the clock the SDK's own span times use). */
const epochNow = (): number => performance.timeOrigin + performance.now();

/**
 * What a limiter's events tell a trace. The events come when a call has been decided, with
 * the time it took; no event marks the start of a store call. So the `floodgate.consume` span
 * is recorded afterwards, with its start set `latencyMs` before its end: it sits at the right
 * place on the timeline, under the span that was active when the limiter was called, but it
 * was not active during the store call (a Redis client's own spans are its siblings).
 */
export class Tracing {
  constructor(
    private readonly tracer: Tracer,
    private readonly limiter: string,
  ) {}

  /** A consume the store decided, or onStoreError when `error` is given. */
  decided(decision: Decision, latencyMs: number, error?: Error): void {
    const parent = trace.getActiveSpan();
    const end = epochNow();
    const span = this.tracer.startSpan('floodgate.consume', { kind: SpanKind.INTERNAL, startTime: end - latencyMs });
    const recording = span.isRecording();
    if (recording || parent?.isRecording()) {
      const attributes: Attributes = decisionAttributes(this.limiter, decision);
      if (error !== undefined) attributes[ERROR_TYPE] = errorType(error);
      // An event rather than attributes on the caller's span: a request that passes several
      // limiters (site-wide, then per route) keeps every decision.
      parent?.addEvent('floodgate.decision', attributes, end);
      if (recording) {
        span.setAttributes(attributes);
        if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
      }
    }
    span.end(end);
  }

  /** A peek, refund or release whose store call failed: the call still returned (a peek admits, the others give up). */
  failed(operation: StoreOperation, error: Error): void {
    const parent = trace.getActiveSpan();
    if (parent === undefined || !parent.isRecording()) return;
    parent.addEvent('floodgate.store_error', { [LIMITER]: this.limiter, [OPERATION]: operation, [ERROR_TYPE]: errorType(error) });
  }
}
