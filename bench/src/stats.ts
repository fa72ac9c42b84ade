/*
 * Medians and paired ratios. Absolute numbers on a shared machine drift from
 * minute to minute; a ratio of two contenders measured back to back in the
 * same round does not, so every ratio is the median of per-round ratios.
 */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Median over rounds of `a[r] / b[r]` (rounds where either is missing are skipped). */
export function pairedRatio(a: readonly number[], b: readonly number[]): number {
  const ratios: number[] = [];
  for (let r = 0; r < Math.min(a.length, b.length); r++) {
    const x = a[r] as number;
    const y = b[r] as number;
    if (Number.isFinite(x) && Number.isFinite(y) && y > 0) ratios.push(x / y);
  }
  return median(ratios);
}

/** The lowest and highest of the per-round ratios `a[r] / b[r]` (the spread `pairedRatio` takes the median of). */
export function ratioRange(a: readonly number[], b: readonly number[]): [number, number] {
  const ratios: number[] = [];
  for (let r = 0; r < Math.min(a.length, b.length); r++) {
    const x = a[r] as number;
    const y = b[r] as number;
    if (Number.isFinite(x) && Number.isFinite(y) && y > 0) ratios.push(x / y);
  }
  return ratios.length === 0 ? [Number.NaN, Number.NaN] : [Math.min(...ratios), Math.max(...ratios)];
}

/** `[a, b, c]` rotated by `by`: round r runs the contenders starting at a different one, so none always goes first. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const n = items.length;
  if (n === 0) return [];
  const shift = ((by % n) + n) % n;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

export const formatRatio = (ratio: number): string => (Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : '–');

/** 1234567 → "1.23 M", 45678 → "45.7 k". */
export function formatRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return '–';
  if (perSecond >= 1e6) return `${(perSecond / 1e6).toFixed(2)} M`;
  if (perSecond >= 1e3) return `${(perSecond / 1e3).toFixed(1)} k`;
  return perSecond.toFixed(0);
}

export const formatNumber = (value: number, digits = 0): string => (Number.isFinite(value) ? value.toFixed(digits) : '–');
