/** Progress goes to stderr, so that stdout holds only the tables. */
export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}
