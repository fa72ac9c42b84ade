/*
 * The Upstash REST bridge of @floodgate/test-support (the documented Upstash
 * REST protocol, each command run on a private redis-server), in a process of
 * its own, so that it does not share an event loop with the clients it
 * serves. Started by edge.ts; answers 'requests' with the REST requests it
 * served since the last time it was asked; killed when the harness is done.
 *
 * One thing of Upstash's service the bridge adds here: @upstash/ratelimit's
 * scripts declare `#!lua flags=allow-key-locking`, a flag of Upstash's
 * servers that redis-server 7.0 refuses ("Unexpected flag in script
 * shebang"). As Upstash runs them, the bridge runs them without that flag,
 * and answers EVALSHA of the script as sent with the script it ran.
 */
import { createHash } from 'node:crypto';
import { startRestBridge } from '@floodgate/test-support';
import { reply, workerInput } from './child.js';

const { redisPort } = workerInput<{ redisPort: number }>();
const bridge = await startRestBridge({ redisPort });

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
/** SHA of a script as a client sent it → SHA of the script Redis ran. */
const ran = new Map<string, string>();
const call = bridge.redis.callBuffer.bind(bridge.redis) as (name: string, ...args: (string | Buffer | number)[]) => Promise<unknown>;
(bridge.redis as unknown as { callBuffer: typeof call }).callBuffer = (name, ...args) => {
  const command = name.toUpperCase();
  if ((command === 'EVAL' || command === 'EVAL_RO') && /^#!lua flags=[^\n]*allow-key-locking/.test(String(args[0]))) {
    const script = String(args[0]);
    const runnable = script.replace(/^(#!lua flags=)([^\n]*)/, (_, head: string, flags: string) => {
      const kept = flags
        .split(',')
        .filter((flag) => flag.trim() !== 'allow-key-locking')
        .join(',');
      return kept === '' ? '#!lua' : `${head}${kept}`;
    });
    ran.set(sha1(script), sha1(runnable));
    args[0] = runnable;
  } else if (command === 'EVALSHA' || command === 'EVALSHA_RO') {
    args[0] = ran.get(String(args[0])) ?? (args[0] as string);
  }
  return call(name, ...args);
};

process.on('message', (message) => {
  if (message !== 'requests') return;
  const served = bridge.requests.length;
  bridge.requests.length = 0;
  void reply({ served });
});
await reply({ url: bridge.url, token: bridge.token });
