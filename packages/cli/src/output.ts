/** A table for people: columns padded to their widest cell, two spaces apart. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** One JSON document; Infinity (a cost that can never fit) as null, as JSON.stringify writes it. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A time on the epoch as an ISO date. */
export const isoDate = (ms: number): string => new Date(ms).toISOString();
