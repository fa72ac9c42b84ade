import { getRateLimit, withRateLimit } from '@floodgate/fetch';
import { clientKey } from '../../../lib/client-key';

// 5 requests a minute per client; the handler sees its decision.
export const GET = withRateLimit((request: Request) => Response.json({ hello: 'world', remaining: getRateLimit(request)?.remaining }), {
  limit: 5,
  windowMs: 60_000,
  key: clientKey,
});
