/*
 * One of the processes racing on one key in accuracy.ts. For each library the
 * parent names, it builds the limiter on its own Redis connection, says
 * 'ready', and on 'go' makes its calls, `inFlight` at a time.
 */
import { Redis } from 'ioredis';
import { reply, workerInput } from './child.js';
import type { Contender } from './memory-contenders.js';
import { createRedisContender, type RedisContenderId, type RedisRule, type RunOutcome, runCalls } from './redis-contenders.js';

export type AccuracyCommand = { setup: RedisContenderId; key: string; rule: RedisRule } | { go: true; calls: number; inFlight: number };

const { redisPort } = workerInput<{ redisPort: number }>();
const redis = new Redis({ port: redisPort, host: '127.0.0.1' });
let contender: Contender | undefined;
let key = '';

process.on('message', async (command: AccuracyCommand) => {
  if ('setup' in command) {
    contender = await createRedisContender(command.setup, redis, command.rule);
    key = command.key;
    await reply('ready');
  } else if (contender !== undefined) {
    const outcome: RunOutcome = await runCalls(contender, [key], command.calls, command.inFlight);
    await reply(outcome);
  }
});
await reply('started');
