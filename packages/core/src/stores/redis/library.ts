/** A Redis script and its SHA-1, for EVALSHA. */
export interface LuaScript {
  readonly source: string;
  readonly sha1: string;
}

/**
 * Floodgate's Redis library (packages/core/lua), as Redis 7 Functions and, for
 * servers without them, as scripts of the same text.
 */
export interface RedisLibrary {
  /** The library's name for FUNCTION LOAD: `floodgate_<hash of its text>`. */
  readonly name: string;
  /** The library's source for FUNCTION LOAD. */
  readonly functions: string;
  /** The function every writing operation calls. */
  readonly write: string;
  /** The function peek calls: flagged no-writes, so FCALL_RO runs it on a replica. */
  readonly readOnly: string;
  /**
   * The fast path (lua/fast-prelude.lua, each algorithm's fast.lua): a consume of one plain rule on Redis's
   * clock, taking the key, the rule's spec and the cost (none when 1). It answers the
   * rule's view without the block's numbers, or, for a key it cannot decide,
   * what the write function answers.
   */
  readonly fast: string;
  /**
   * Several calls of `write` and `fast` in one (lua/calls.lua): the store's connection sends the
   * calls of one turn of the event loop with it. It answers one reply per call, and a call that
   * failed answers its error's text.
   */
  readonly many: string;
  /** The same library as scripts, for EVALSHA; `fast` is fast.lua alone, and answers nil where it cannot decide. */
  readonly scripts: { readonly write: LuaScript; readonly readOnly: LuaScript; readonly fast: LuaScript };
}
