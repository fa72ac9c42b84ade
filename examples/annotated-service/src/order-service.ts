// The service: one method, four limits, one decorator. The decorator owns its
// limiter (created once, when the class is defined, and shared by every
// instance); its four rules are checked in one call to Redis, all or nothing.
import { RedisStore, rateLimited } from '@floodgate/core';
import { Redis } from 'ioredis';

/** Who places an order: the client's address and the signed-in user. */
export interface Caller {
  ip: string;
  user: string;
}

// The example starts its own redis-server and says where (REDIS_PORT): it never uses the machine's Redis.
export const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT), maxRetriesPerRequest: 1 });

export class OrderService {
  readonly placed: string[] = [];

  @rateLimited({
    rules: [
      { name: 'all-10s', scope: 'global', limit: 50, windowMs: 10_000 },
      { name: 'all-60s', scope: 'global', limit: 100, windowMs: 60_000 },
      { name: 'per-ip', scope: 'ip', limit: 5, windowMs: 2_000 },
      { name: 'per-user', scope: 'user', limit: 2, windowMs: 1_000 },
    ],
    store: new RedisStore({ client: redis }),
    prefix: 'orders:',
    key: (caller: Caller) => ({ ip: caller.ip, user: caller.user }),
  })
  async placeOrder(caller: Caller, item: string): Promise<string> {
    const id = `order-${this.placed.length + 1}`;
    this.placed.push(id);
    return `${id}: ${item} for ${caller.user}`;
  }
}
