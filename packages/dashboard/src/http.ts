import type { IncomingMessage, ServerResponse } from 'node:http';

/** What the API answers: a status and a JSON body (none for 204). */
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** An answer that refuses the request: `{ error: { code?, message } }`. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function send(res: ServerResponse, answer: Answer): void {
  const json = answer.body === undefined ? '' : JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...(json === '' ? {} : { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(json)) }),
    ...answer.headers,
  });
  res.end(json);
}

export function refusalAnswer(refusal: Refusal): Answer {
  const error = refusal.code === undefined ? { message: refusal.message } : { code: refusal.code, message: refusal.message };
  return { status: refusal.status, body: { error }, headers: refusal.headers };
}

/** 127.0.0.0/8 and ::1, as IPv4 or IPv4-mapped IPv6. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return address === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/**
 * Whether a request that changes something comes from the dashboard's own
 * page: a browser says so in Sec-Fetch-Site, or, where it sends no Fetch
 * Metadata (plain http on a host other than localhost), in Origin. A page of
 * another site can send neither, so this is the CSRF check; scripts (curl)
 * send `Origin` themselves.
 */
export function isSameOrigin(req: IncomingMessage): boolean {
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined) return site === 'same-origin';
  const origin = header(req, 'origin');
  const host = header(req, 'host');
  if (origin === undefined || host === undefined) return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** The JSON object of a request body, at most `maxBytes` (413), as application/json (415). */
export async function readJson(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  // A body parser before the dashboard (express.json()) has read the stream already.
  const parsed = (req as { body?: unknown }).body;
  if (parsed !== undefined && req.readableEnded) return asObject(parsed);
  const type = header(req, 'content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) throw new Refusal(415, 'Send the body as JSON (Content-Type: application/json).', 'ERR_FG_OPTION');
  const declared = Number(header(req, 'content-length') ?? 0);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  try {
    return asObject(JSON.parse(Buffer.concat(chunks).toString('utf8')));
  } catch (error) {
    if (error instanceof Refusal) throw error;
    throw new Refusal(400, 'The body is not valid JSON.', 'ERR_FG_OPTION');
  }
}

function tooLarge(maxBytes: number): Refusal {
  return new Refusal(413, `The body is larger than ${maxBytes} bytes (dashboard({ maxBodyBytes })).`, 'ERR_FG_OPTION', { connection: 'close' });
}

function asObject(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Refusal(400, 'The body must be a JSON object.', 'ERR_FG_OPTION');
  return value as Record<string, unknown>;
}
