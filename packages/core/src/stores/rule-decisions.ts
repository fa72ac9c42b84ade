/*
 * A rule's decision from the verdict its algorithm (and its block) made:
 * one way for every store, so that the memory store, RedisStore and the
 * Durable Object store report the same numbers for the same verdict.
 */
import type { Verdict } from '../algorithms/types.js';
import type { CompiledRule } from '../rules.js';
import { blockedOf, type RuleDecision } from './types.js';

/** A verdict as a store reports it: all of it but how long the state is kept, which is the store's business. */
export type ReportedVerdict = Omit<Verdict, 'ttlMs'>;

/** What a rule reports about a call it admitted, as part of an admitted call: the state after it. */
export function admittedDecision(rule: CompiledRule, v: ReportedVerdict): RuleDecision {
  return {
    name: rule.name,
    scope: rule.scope,
    allowed: true,
    limit: rule.limit,
    remaining: v.remaining,
    resetMs: v.resetMs,
    retryAfterMs: 0,
    delayMs: v.delayMs,
  };
}

/**
 * A rule's decision when nothing was recorded (a denied call, a rule that
 * admits a call another rule denies, or a peek): the state now, and the
 * block that holds the key, or that this call started.
 */
export function unchangedDecision(rule: CompiledRule, v: ReportedVerdict, peek: boolean): RuleDecision {
  const decision: RuleDecision = {
    name: rule.name,
    scope: rule.scope,
    allowed: v.allowed,
    limit: rule.limit,
    remaining: v.remainingNow,
    resetMs: v.resetMsNow,
    retryAfterMs: v.retryAfterMs,
    delayMs: peek && v.allowed ? v.delayMs : 0,
  };
  const blocked = blockedOf(v);
  if (blocked !== undefined) decision.blocked = blocked;
  return decision;
}
