import { withRateLimit } from '@floodgate/fetch';
import { type NextRequest, NextResponse } from 'next/server';
import { clientKey } from './lib/client-key';

// 3 requests a minute per client to /api/limited/*, checked before the route runs (Edge runtime).
// The headers land on the route's response; a denial is answered here, and the route never runs.
export const middleware = withRateLimit((_request: NextRequest) => NextResponse.next(), { limit: 3, windowMs: 60_000, key: clientKey });

export const config = { matcher: '/api/limited/:path*' };
