// The demo: orders from one user, from one address, then from everyone; each
// denial names the rule that refused it. Redis counts the script calls it ran
// (INFO commandstats): one FCALL per order, whichever rules it touched.
import { RateLimitedError } from '@floodgate/core';
import { type Caller, OrderService, redis } from './order-service.js';

const orders = new OrderService();
const refusedBy: Record<string, number> = {};
let admitted = 0;
let calls = 0;

async function order(caller: Caller, item: string, show = true): Promise<void> {
  calls++;
  try {
    const placed = await orders.placeOrder(caller, item);
    admitted++;
    if (show) console.log(`  ${caller.user}@${caller.ip}: ${placed}`);
  } catch (error) {
    if (!(error instanceof RateLimitedError)) throw error;
    refusedBy[error.decision.rule] = (refusedBy[error.decision.rule] ?? 0) + 1;
    if (show) console.log(`  ${caller.user}@${caller.ip}: refused, ${error.message.replace(/ \[ERR_FG_RATE_LIMITED\]$/, '')}`);
  }
}

/** Script calls Redis has run so far: FCALL (Redis 7 Functions), and EVALSHA/EVAL where Functions are not available. */
async function scriptCalls(): Promise<number> {
  const stats = await redis.info('commandstats');
  let total = 0;
  for (const command of ['fcall', 'evalsha', 'eval']) total += Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return total;
}

/** The commands this client sends Redis while `action` runs, as MONITOR reports them (not those the function runs inside Redis). */
async function monitored(action: () => Promise<void>): Promise<string[]> {
  const connection = redis.duplicate();
  const monitor = await connection.monitor();
  const seen: string[] = [];
  const marker = `end-${Date.now()}`;
  const done = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua') return;
      if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) resolve();
      else seen.push(args.map((a) => (/^[\w:{}%.-]+$/.test(a) ? a : JSON.stringify(a))).join(' '));
    });
  });
  await action();
  await redis.echo(marker);
  await done;
  monitor.disconnect();
  connection.disconnect();
  return seen;
}

// The function library is loaded on the first call that finds it missing: a first order, so that the count below is of orders only.
await order({ ip: '198.51.100.1', user: 'early-bird' }, 'coffee beans', false);
const before = await scriptCalls();

console.log('One user, u1, from 203.0.113.9 (2 a second per user):');
for (const item of ['tea', 'milk', 'sugar']) await order({ ip: '203.0.113.9', user: 'u1' }, item);

console.log('\nTwo more users from the same address (5 per 2 s per IP):');
for (const user of ['u2', 'u2', 'u3', 'u3']) await order({ ip: '203.0.113.9', user }, 'bread');

console.log('\nEveryone: 60 users, each from an address of their own (50 per 10 s for everyone):');
const admittedBefore = admitted;
for (let i = 1; i <= 60; i++) await order({ ip: `192.0.2.${i}`, user: `user-${i}` }, 'jam', false);
console.log(
  `  ${admitted - admittedBefore} admitted, ${refusedBy['all-10s'] ?? 0} refused by 'all-10s': ${admitted} orders in these 10 s, the first one included`,
);

const after = await scriptCalls();
console.log(`\nRedis ran ${after - before} script calls for ${calls - 1} orders: one round trip per order, its four rules checked together`);

console.log('\nWhat one more order sends Redis (MONITOR):');
for (const line of await monitored(() => order({ ip: '192.0.2.200', user: 'u200' }, 'honey', false))) console.log(`  ${line}`);

redis.disconnect();
