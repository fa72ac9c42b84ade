// @ts-check
// An OrderService whose method is limited by one @rateLimited decorator:
//
//   pnpm example annotated-service   (from the repository root; or: npm start in this folder, packages built)
//
// Starts a private redis-server (from the PATH) on a free port, runs the demo
// compiled from src/ (tsc: `npm start` compiles first), and stops redis-server.
import { startRedis } from '../private-redis.mjs';

const redis = await startRedis();
console.log(`redis-server (pid ${redis.pid}) on 127.0.0.1:${redis.port}\n`);
process.env.REDIS_PORT = String(redis.port);
try {
  await import('./dist/demo.js');
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await redis.stop();
  console.log(`\nstopped redis-server (pid ${redis.pid})`);
}
