/*
 * The @rateLimit schema directive: the SDL users add to their type
 * definitions, and a transformer (@graphql-tools/utils' mapSchema and
 * getDirective, as every schema directive of graphql-tools) that wraps the
 * resolver of each field carrying it. A field gets a limiter of its own
 * (prefix `<prefix><Type>.<field>:`), all of one directive's fields share
 * its store; each resolution is one call, keyed like the operation.
 */
import { ErrorCodes, FloodgateError, type Keys, type Limiter, type LimiterOptions, MemoryStore, type RuleOptions } from '@floodgate/core';
import { type CallFlow, createCallFlow } from '@floodgate/core/adapter';
import { getDirective, MapperKind, mapSchema } from '@graphql-tools/utils';
import {
  type DocumentNode,
  defaultFieldResolver,
  type GraphQLFieldConfig,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
} from 'graphql';
import { compileMessage, decide, errorOf, type Verdict } from './gate.js';
import { defaultKey, type OperationArgs, type OperationType } from './keys.js';

/** What the directive's callbacks (`key`, `skip`, `message`) receive: the operation, and the field being resolved. */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type is the app's (see PerOperation)
export interface FieldArgs<TContext = any> extends OperationArgs<TContext> {
  /** The field's schema coordinate: `'Query.search'`. */
  readonly field: string;
  /** The field's arguments, coerced. */
  readonly args: Readonly<Record<string, unknown>>;
  /** The parent object (the value the field is resolved on). */
  readonly source: unknown;
  readonly info: GraphQLResolveInfo;
}

/** A function of the field being resolved. */
// biome-ignore lint/suspicious/noExplicitAny: see FieldArgs
export type PerField<T, TContext = any> = (field: FieldArgs<TContext>) => T | Promise<T>;

/** The limiter options every field of one directive shares: where and how state is kept. */
const SHARED_OPTIONS = ['store', 'prefix', 'timeoutMs', 'onStoreError', 'now', 'localDenyCache'] as const;

/** Options of `rateLimitDirective()`: where the fields' counts live, and how a field's calls are keyed. */
// biome-ignore lint/suspicious/noExplicitAny: see FieldArgs
export interface RateLimitDirectiveOptions<TContext = any> extends Pick<LimiterOptions, (typeof SHARED_OPTIONS)[number]> {
  /** The directive's name in the schema. @defaultValue 'rateLimit' */
  name?: string;
  /**
   * The key(s) a field's calls are limited under: a function of the field, or one per scope
   * the directives' rules name (`scope: "user"`). @defaultValue the client address of `context.req`
   */
  key?: PerField<Keys, TContext> | Readonly<Record<string, PerField<string, TContext>>>;
  /** Calls for which this returns true are not limited. */
  skip?: PerField<boolean, TContext>;
  /** Decide and emit events, but never deny: a dark launch. @defaultValue false */
  shadow?: boolean;
  /** The message of a denied field's error. @defaultValue 'Too many requests, please try again later.' */
  message?: string | PerField<string, TContext>;
}

/** What `rateLimitDirective()` returns: the SDL, the transformer, and the limiters it made. */
export interface RateLimitDirective {
  /** The directive's definition, to add to your type definitions. */
  readonly typeDefs: string;
  /** Wraps the resolvers of the schema's fields that carry the directive; returns the new schema. */
  transformer(schema: GraphQLSchema): GraphQLSchema;
  /** The limiter of each limited field by coordinate (`'Query.search'`), once `transformer` ran: listen to their events here. */
  readonly limiters: ReadonlyMap<string, Limiter>;
}

/** The directive's arguments, as getDirective reads them (the SDL says their types). */
interface DirectiveArgs {
  limit: number;
  windowMs: number;
  algorithm?: string | null;
  burst?: number | null;
  segments?: number | null;
  blockMs?: number | null;
  maxBlockMs?: number | null;
  scope?: string | null;
  name?: string | null;
  cost?: number | null;
  perOperation?: boolean | null;
}

const RULE_ARGS = ['algorithm', 'limit', 'windowMs', 'burst', 'segments', 'blockMs', 'maxBlockMs', 'scope'] as const;

/** The SDL of a directive named `name`. */
const sdlOf = (name: string): string => `"""
Limits how often the field is resolved (see @floodgate/graphql). Repeat it for several rules, all of which must pass
(each then needs a name). cost: units each resolution takes (1). perOperation: count the field once per operation,
however many times the operation resolves it (in a list, say).
"""
directive @${name}(
  limit: Int!
  windowMs: Int!
  algorithm: String
  burst: Int
  segments: Int
  blockMs: Int
  maxBlockMs: Int
  scope: String
  name: String
  cost: Int
  perOperation: Boolean
) repeatable on FIELD_DEFINITION
`;

/** The operation a resolver runs in, as the callbacks see it. */
function fieldArgsOf(coordinate: string, source: unknown, args: Record<string, unknown>, context: unknown, info: GraphQLResolveInfo): FieldArgs {
  const document: DocumentNode = { kind: Kind.DOCUMENT, definitions: [info.operation, ...Object.values(info.fragments)] };
  return {
    context,
    operationName: info.operation.name?.value,
    operationType: info.operation.operation as OperationType,
    document,
    variables: info.variableValues,
    schema: info.schema,
    field: coordinate,
    args,
    source,
    info,
  };
}

/** The verdicts of `perOperation` fields, by context, then operation, then field. */
const perOperation = new WeakMap<object, WeakMap<OperationDefinitionNode, Map<string, Promise<Verdict>>>>();

/**
 * A `@rateLimit` schema directive: per-field limits written in the schema. Add `typeDefs` to
 * your type definitions, and pass the schema through `transformer`. Each resolution of a
 * field carrying it is a call of that field's limiter, keyed like the operation (the client
 * address of `context.req` by default); a denied field resolves to a GraphQL error at its
 * path, `extensions: { code: 'RATE_LIMITED', retryAfterMs, rule }`, while the other fields
 * resolve. A field inside a list is resolved, and counted, once per item; `perOperation:
 * true` counts it once per operation (the first resolution decides for all of them).
 *
 * @example
 * ```ts
 * import { createSchema } from 'graphql-yoga';
 * import { rateLimitDirective } from '@floodgate/graphql';
 *
 * const { typeDefs, transformer } = rateLimitDirective();
 * const schema = transformer(
 *   createSchema({
 *     typeDefs: [typeDefs, 'type Query { search(q: String!): [String!]! @rateLimit(limit: 5, windowMs: 60000) }'],
 *     resolvers: { Query: { search: () => [] } },
 *   }),
 * );
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: see FieldArgs
export function rateLimitDirective<TContext = any>(options: RateLimitDirectiveOptions<TContext> = {}): RateLimitDirective {
  const where = "@floodgate/graphql's rateLimitDirective()";
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where} takes an options object like { key: keyBy.ip() }, got ${options === null ? 'null' : typeof options}.`,
    );
  }
  const known = new Set<string>(['name', 'key', 'skip', 'shadow', 'message', ...SHARED_OPTIONS]);
  const unknown = Object.keys(options).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new FloodgateError(
      ErrorCodes.UNKNOWN_OPTION,
      `${where} has no option ${unknown.map((n) => `'${n}'`).join(', ')}: rules are the directive's arguments in the schema (@rateLimit(limit: 10, windowMs: 60000)).`,
    );
  }
  const name = options.name ?? 'rateLimit';
  if (typeof name !== 'string' || !/^[_A-Za-z][_0-9A-Za-z]*$/.test(name)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `name must be a GraphQL name like 'rateLimit', got ${typeof name === 'string' ? JSON.stringify(name) : typeof name}.`,
    );
  }
  const { key, skip, shadow } = options;
  const messageOf = compileMessage<FieldArgs>(options.message, 'field');
  // One store for every field (their prefixes keep them apart): a MemoryStore of the directive's own unless one is given.
  const shared: Record<string, unknown> = { store: options.store ?? new MemoryStore() };
  for (const option of SHARED_OPTIONS) if (option !== 'store' && option !== 'prefix' && options[option] !== undefined) shared[option] = options[option];
  const prefix = options.prefix ?? 'fg:';
  const limiters = new Map<string, Limiter>();

  /** One limiter per field, its rules from the directive's arguments. */
  function limitOf(coordinate: string, usages: readonly DirectiveArgs[]) {
    const at = `@${name} on ${coordinate}`;
    const rules = usages.map((usage, i) => {
      const rule: Record<string, unknown> = {};
      for (const arg of RULE_ARGS) if (usage[arg] !== undefined && usage[arg] !== null) rule[arg] = usage[arg];
      if (usage.name != null) rule.name = usage.name;
      else if (usages.length > 1)
        throw new FloodgateError(ErrorCodes.RULES, `${at}: repeated ${usages.length} times, each needs a name (rule ${i + 1} has none).`);
      return rule as unknown as RuleOptions;
    });
    const given = (arg: 'cost' | 'perOperation') => [...new Set(usages.map((u) => u[arg]).filter((v) => v !== undefined && v !== null))];
    const costs = given('cost');
    const once = given('perOperation');
    if (costs.length > 1 || once.length > 1)
      throw new FloodgateError(ErrorCodes.OPTION, `${at}: the repeated directives give different cost or perOperation; give them once.`);
    let flow: CallFlow<[FieldArgs]>;
    try {
      // One directive is one rule in shorthand, so that an error names its argument (`limit must be ...`).
      const ruleOptions = rules.length === 1 ? { ...rules[0] } : { rules };
      const fieldOptions = { ...shared, prefix: `${prefix}${coordinate}:`, ...ruleOptions, key, skip, shadow, cost: costs[0] };
      flow = createCallFlow<[FieldArgs]>(fieldOptions as CallFlow.Options<[FieldArgs]>, { where: at, defaultKey: () => defaultKey });
    } catch (error) {
      const fg = error as FloodgateError;
      throw new FloodgateError(fg.code ?? ErrorCodes.OPTION, `${at}: ${fg.message.replace(/ \[ERR_FG_[A-Z_]+\]$/, '')}`, { cause: error });
    }
    if (options.key === undefined) {
      const scopes = rules.map((r) => r.scope).filter((s) => s !== undefined && s !== 'key' && s !== 'global');
      if (scopes.length > 0) {
        throw new FloodgateError(
          ErrorCodes.OPTION,
          `${at}: scope '${scopes[0]}' needs the directive's key option to name its keys, like key: { ${scopes[0]}: ({ context }) => ... }.`,
        );
      }
    }
    limiters.set(coordinate, flow.limiter);
    return { flow, perOperation: once[0] === true };
  }

  function transformer(schema: GraphQLSchema): GraphQLSchema {
    const subscriptionType = schema.getSubscriptionType()?.name;
    return mapSchema(schema, {
      [MapperKind.OBJECT_FIELD]: (fieldConfig, fieldName, typeName) => {
        const usages = getDirective(schema, fieldConfig, name) as DirectiveArgs[] | undefined;
        if (usages === undefined || usages.length === 0) return fieldConfig;
        const coordinate = `${typeName}.${fieldName}`;
        const limit = limitOf(coordinate, usages);

        const decideField = (field: FieldArgs): Promise<Verdict> => decide(limit.flow, messageOf, field);

        /** The verdict on this resolution: decided now, or (perOperation) the one of the operation's first. */
        function verdictOf(field: FieldArgs): Promise<Verdict> {
          const context = field.context;
          if (!limit.perOperation || typeof context !== 'object' || context === null) return decideField(field);
          let byOperation = perOperation.get(context);
          if (byOperation === undefined) {
            byOperation = new WeakMap();
            perOperation.set(context, byOperation);
          }
          let byField = byOperation.get(field.info.operation);
          if (byField === undefined) {
            byField = new Map();
            byOperation.set(field.info.operation, byField);
          }
          let verdict = byField.get(coordinate);
          if (verdict === undefined) {
            verdict = decideField(field);
            byField.set(coordinate, verdict);
          }
          return verdict;
        }

        const limited =
          (inner: GraphQLFieldResolver<unknown, unknown>): GraphQLFieldResolver<unknown, unknown> =>
          async (source, args, context, info) => {
            const verdict = await verdictOf(fieldArgsOf(coordinate, source, args, context, info));
            if (verdict.kind === 'deny' || verdict.kind === 'fail') throw errorOf(verdict, false);
            return inner(source, args, context, info);
          };
        // A subscription field is limited when it is subscribed to, not at each event it delivers.
        const wrapped: GraphQLFieldConfig<unknown, unknown> =
          typeName === subscriptionType && fieldConfig.subscribe !== undefined
            ? { ...fieldConfig, subscribe: limited(fieldConfig.subscribe) }
            : { ...fieldConfig, resolve: limited(fieldConfig.resolve ?? defaultFieldResolver) };
        return wrapped;
      },
    });
  }

  return { typeDefs: sdlOf(name), transformer, limiters };
}
