import type { RuleNumbers, StateCodec, StateVector, VectorAlgorithm } from './types.js';

const integer = (text: string): number => (/^(?:0|[1-9]\d{0,15})$/.test(text) ? Number(text) : Number.NaN);

/**
 * The text of a fixed-size state: its numbers, comma-separated; read back only
 * when it has the size the rule's algorithm needs, every number is an integer
 * from 0 to 2^53, and `valid` accepts it (a number that divides must not be 0).
 */
export function vectorCodec(tag: string, algorithm: VectorAlgorithm, valid: (numbers: readonly number[]) => boolean = () => true): StateCodec<StateVector> {
  return {
    tag,
    encode: (state) => Array.from({ length: state.length }, (_, i) => state[i]).join(','),
    decode(rule: RuleNumbers, text: string) {
      const numbers = text.split(',').map(integer);
      if (numbers.length !== algorithm.stateSize(rule) || !numbers.every(Number.isSafeInteger) || !valid(numbers)) return undefined;
      return numbers;
    },
  };
}
