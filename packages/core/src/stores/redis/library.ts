/** A Redis script and its SHA-1, for EVALSHA. */
export interface LuaScript {
  readonly source: string;
  readonly sha1: string;
}

/**
 * Floodgate's Redis library (packages/core/lua), as Redis 7 Functions and, for
 * servers without them, as two scripts of the same text.
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
  /** The same library as scripts, for EVALSHA. */
  readonly scripts: { readonly write: LuaScript; readonly readOnly: LuaScript };
}
