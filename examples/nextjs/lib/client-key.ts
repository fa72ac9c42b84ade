import { keyBy } from '@floodgate/fetch';

/**
 * Who a request comes from, by what is in front of Next.js:
 * - on Vercel, the address Vercel's edge sets (x-vercel-forwarded-for, else x-real-ip);
 * - self-hosted behind one proxy that appends the client's address to X-Forwarded-For
 *   (nginx, a load balancer), that entry: keyBy.forwardedFor({ hops }) with your proxy count.
 * Bare `next start` fills X-Forwarded-For only when the client sent none, so a client could
 * pick its own key there: put a proxy in front before relying on it.
 */
export const clientKey = process.env.VERCEL ? keyBy.vercel() : keyBy.forwardedFor({ hops: 1 });
