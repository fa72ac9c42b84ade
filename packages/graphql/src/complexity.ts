/*
 * The cost of an operation before it runs, from its document and the schema:
 * what `cost: 'complexity'` charges. An upper bound of the resolvers a request
 * can start, cheap to compute whatever a client sends: every step is bounded
 * (depth, list sizes, the total), and fragments are costed once per place
 * they are costed from, so nested spreads cannot make the work explode.
 */

import { ErrorCodes, FloodgateError } from '@floodgate/core';
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
  type ValueNode,
} from 'graphql';

/** How `cost: 'complexity'` weighs an operation. */
export interface ComplexityOptions {
  /** Units each selected field costs. @defaultValue 1 */
  fieldWeight?: number;
  /**
   * Units of particular fields, by schema coordinate: `{ 'Query.search': 10, 'User.avatar': 0 }`.
   * `__typename` costs 0 unless named here as `'<Type>.__typename'`.
   */
  weights?: Readonly<Record<string, number>>;
  /** Arguments that say how many items a field returns: the first one present is its multiplier. @defaultValue ['first', 'last', 'limit'] */
  listArguments?: readonly string[];
  /** The multiplier of a list field without a list argument. @defaultValue 1 */
  defaultListSize?: number;
  /** A list argument above this (or not a number) counts as this. @defaultValue 100 */
  maxListSize?: number;
  /** Fields nested deeper than this make the operation cost `Number.MAX_SAFE_INTEGER`: it never passes. @defaultValue 15 */
  maxDepth?: number;
}

/** What `operationComplexity()` reads: an operation's document, with the schema it runs against. */
export interface ComplexityInput {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  /** Which operation of the document (the only one when undefined). */
  readonly operationName?: string | undefined;
  /** The variables as the client sent them (list arguments may come from them). */
  readonly variables?: Readonly<Record<string, unknown>> | undefined;
}

/** The cost of an operation that can never pass: above any rule's capacity (limits have at most 15 digits). */
export const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** Nested selection sets (fields and fragments) walked at most: a document nested deeper costs UNBOUNDED. */
const MAX_NESTING = 256;

interface Weighing {
  readonly fieldWeight: number;
  readonly weights: ReadonlyMap<string, number>;
  readonly listArguments: readonly string[];
  readonly defaultListSize: number;
  readonly maxListSize: number;
  readonly maxDepth: number;
}

function checkCount(value: unknown, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min) return value;
  throw new FloodgateError(ErrorCodes.OPTION, `complexity.${name} must be an integer >= ${min}, got ${JSON.stringify(value) ?? typeof value}.`);
}

const weighings = new WeakMap<ComplexityOptions, Weighing>();

/** The options checked and defaulted (once per options object). */
export function weighingOf(options: ComplexityOptions = {}): Weighing {
  const known = weighings.get(options);
  if (known !== undefined) return known;
  if (typeof options !== 'object' || options === null) throw new FloodgateError(ErrorCodes.OPTION, 'complexity must be an object of weighing options.');
  const weights = new Map<string, number>();
  for (const [coordinate, weight] of Object.entries(options.weights ?? {})) {
    if (!/^[_A-Za-z][_0-9A-Za-z]*\.[_A-Za-z][_0-9A-Za-z]*$/.test(coordinate)) {
      throw new FloodgateError(ErrorCodes.OPTION, `complexity.weights keys are schema coordinates like 'Query.search', got ${JSON.stringify(coordinate)}.`);
    }
    weights.set(coordinate, checkCount(weight, `weights['${coordinate}']`, 0, 0));
  }
  const listArguments = options.listArguments ?? ['first', 'last', 'limit'];
  if (!Array.isArray(listArguments) || listArguments.some((name) => typeof name !== 'string')) {
    throw new FloodgateError(ErrorCodes.OPTION, "complexity.listArguments must be a list of argument names like ['first', 'last', 'limit'].");
  }
  const weighing: Weighing = {
    fieldWeight: checkCount(options.fieldWeight, 'fieldWeight', 1, 0),
    weights,
    listArguments,
    defaultListSize: checkCount(options.defaultListSize, 'defaultListSize', 1, 0),
    maxListSize: checkCount(options.maxListSize, 'maxListSize', 100, 0),
    maxDepth: checkCount(options.maxDepth, 'maxDepth', 15, 1),
  };
  weighings.set(options, weighing);
  return weighing;
}

/** Sums and products that stop at UNBOUNDED, so that no operation's cost overflows. */
const capped = (n: number): number => Math.min(n, UNBOUNDED);

/**
 * The complexity of an operation: an upper bound of the fields it resolves.
 *
 * ```
 * cost(operation)   = max(1, cost(root selection, depth 1))
 * cost(selection,d) = Σ over its fields f, fragments expanded: weight(f) + n(f) × cost(f's selection, d + 1)
 * n(f)              = f's first list argument present (first, last, limit), from 0 to maxListSize
 *                   | defaultListSize when f returns a list without one
 *                   | 1 otherwise
 * weight(f)         = weights['Type.field'] ?? fieldWeight; 0 for __typename
 * ```
 *
 * Every field node counts, aliases each once (`a: user b: user` is two), fields of every
 * fragment and type condition alike (an upper bound for unions and interfaces), whether
 * or not `@skip`/`@include` would drop them. A field deeper than `maxDepth` (or a document
 * nested more than 256 selection sets deep) makes the cost `Number.MAX_SAFE_INTEGER`, above
 * any rule's capacity: such an operation is denied with `retryAfterMs: null`. So is any
 * total that reaches it.
 *
 * @example
 * ```ts
 * operationComplexity({ schema, document: parse('{ users(first: 10) { name posts { title } } }') });
 * // users: 1 + 10 × (name 1 + posts (1 + 1 × title 1)) = 31
 * ```
 */
export function operationComplexity(input: ComplexityInput, options?: ComplexityOptions): number {
  const weighing = weighingOf(options);
  const { schema, document } = input;
  const variables = (input.variables ?? {}) as Readonly<Record<string, unknown>>;
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const operation =
    input.operationName == null ? (operations.length === 1 ? operations[0] : undefined) : operations.find((o) => o.name?.value === input.operationName);
  if (operation === undefined) {
    throw new FloodgateError(
      ErrorCodes.COST,
      `complexity: the document has no operation ${input.operationName == null ? '(or several, and no operationName)' : JSON.stringify(input.operationName)}.`,
    );
  }
  const root = schema.getRootType(operation.operation);
  if (root === undefined || root === null) throw new FloodgateError(ErrorCodes.COST, `complexity: the schema has no ${operation.operation} type.`);
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  const defaults = new Map<string, ValueNode>();
  for (const definition of operation.variableDefinitions ?? []) {
    if (definition.defaultValue !== undefined) defaults.set(definition.variable.name.value, definition.defaultValue);
  }

  /** How many items a field stands for, from a literal, a variable or the argument's default. */
  function listSize(node: FieldNode, field: GraphQLField<unknown, unknown> | undefined): number | undefined {
    for (const name of weighing.listArguments) {
      const argument = node.arguments?.find((a) => a.name.value === name);
      let value: unknown;
      if (argument === undefined) {
        const declared = field?.args.find((a) => a.name === name);
        if (declared?.defaultValue === undefined) continue;
        value = declared.defaultValue;
      } else value = literalOf(argument.value);
      // Not a number (yet): execution coerces or refuses it; until then it is the most it could be.
      if (typeof value !== 'number' || Number.isNaN(value)) return weighing.maxListSize;
      return Math.min(weighing.maxListSize, Math.max(0, Math.floor(value)));
    }
    return undefined;
  }

  /** A number, or what is not one (null, a missing variable: the resolver's own default, unknown here). */
  function literalOf(node: ValueNode): unknown {
    if (node.kind === Kind.INT || node.kind === Kind.FLOAT) return Number(node.value);
    if (node.kind !== Kind.VARIABLE) return undefined;
    const name = node.name.value;
    if (variables[name] !== undefined) return variables[name];
    const fallback = defaults.get(name);
    return fallback === undefined ? undefined : literalOf(fallback);
  }

  function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
    if (type === root) {
      if (name === SchemaMetaFieldDef.name) return SchemaMetaFieldDef;
      if (name === TypeMetaFieldDef.name) return TypeMetaFieldDef;
    }
    return isObjectType(type) || isInterfaceType(type) ? type.getFields()[name] : undefined;
  }

  // A selection set's cost depends on where it is (its type, its depth), never on who spreads it.
  const memo = new Map<SelectionSetNode, Map<string, number>>();

  function costOf(selectionSet: SelectionSetNode, type: GraphQLCompositeType, depth: number, nesting: number): number {
    if (nesting > MAX_NESTING) return UNBOUNDED;
    const place = `${type.name}:${depth}`;
    let known = memo.get(selectionSet);
    const cached = known?.get(place);
    if (cached !== undefined) return cached;
    let total = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) total = capped(total + fieldCost(selection, type, depth, nesting));
      else {
        const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : fragments.get(selection.name.value);
        if (fragment === undefined) continue; // an unknown fragment: validation refuses the document
        const condition = fragment.typeCondition === undefined ? type : schema.getType(fragment.typeCondition.name.value);
        if (condition === undefined || !isCompositeType(condition)) continue;
        total = capped(total + costOf(fragment.selectionSet, condition, depth, nesting + 1));
      }
      if (total === UNBOUNDED) break;
    }
    if (known === undefined) {
      known = new Map();
      memo.set(selectionSet, known);
    }
    known.set(place, total);
    return total;
  }

  function fieldCost(node: FieldNode, parent: GraphQLCompositeType, depth: number, nesting: number): number {
    if (depth > weighing.maxDepth) return UNBOUNDED;
    const name = node.name.value;
    const coordinate = `${parent.name}.${name}`;
    const weight = weighing.weights.get(coordinate) ?? (name === '__typename' ? 0 : weighing.fieldWeight);
    const field = fieldOf(parent, name);
    if (node.selectionSet === undefined || field === undefined) return weight;
    const child = getNamedType(field.type);
    if (!isCompositeType(child)) return weight;
    const items = listSize(node, field) ?? (isListType(getNullableType(field.type)) ? weighing.defaultListSize : 1);
    if (items === 0) return weight;
    return capped(weight + items * costOf(node.selectionSet, child, depth + 1, nesting + 1));
  }

  return Math.max(1, costOf(operation.selectionSet, root, 1, 0));
}
