import { Refusal } from './http.js';

/** Checks of the API's inputs: each refuses with 400 and an ERR_FG_* code that names the field. */
function invalid(message: string, code = 'ERR_FG_OPTION'): Refusal {
  return new Refusal(400, message, code);
}

export function onlyFields(body: Record<string, unknown>, names: readonly string[]): void {
  for (const name of Object.keys(body)) {
    if (!names.includes(name)) throw invalid(`Unknown field '${name}'; this takes ${names.join(', ')}.`, 'ERR_FG_UNKNOWN_OPTION');
  }
}

/** A key (or an override's prefix ending in '*'): 1 to 512 characters. */
export function key(value: unknown): string {
  if (typeof value !== 'string' || value === '' || value.length > 512) throw invalid('key must be a string of 1 to 512 characters.', 'ERR_FG_KEY');
  return value;
}

export function optionalString(value: unknown, name: string, maxLength: number): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string' || value.length > maxLength) throw invalid(`${name} must be a string of at most ${maxLength} characters.`);
  return value;
}

export function positiveInteger(value: unknown, name: string, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw invalid(`${name} must be a whole number from 1 to ${max}, got ${JSON.stringify(value) ?? String(value)}.`);
  }
  return value;
}

/** A query parameter that is a whole number, or its default when absent. */
export function queryInteger(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const text = query.get(name);
  if (text === null || text === '') return fallback;
  if (!/^\d{1,16}$/.test(text)) throw invalid(`${name} must be a whole number from 1 to ${max}, got '${text.slice(0, 40)}'.`);
  return positiveInteger(Number(text), name, max);
}
