/*
 * The same store on node:sqlite (Node 22.5+): run by the test with a Node 22 binary. Prints what
 * a limiter over it decided, and what another connection to the same file reads.
 */
import { DatabaseSync } from 'node:sqlite';
import { createLimiter } from '@floodgate/core';
import { SqliteStore } from '../store.js';

const file = process.argv[2] as string;
const database = new DatabaseSync(file);
const limiter = createLimiter({
  rules: [
    { name: 'per-ip', scope: 'ip', algorithm: 'sliding-log', limit: 2, windowMs: 60_000 },
    { name: 'per-user', scope: 'user', algorithm: 'gcra', limit: 3, windowMs: 60_000 },
  ],
  store: new SqliteStore({ database }),
});
const allowed: boolean[] = [];
for (let i = 0; i < 4; i++) allowed.push((await limiter.consume({ ip: '203.0.113.9', user: 'u1' })).allowed);
const rows = (new DatabaseSync(file).prepare('SELECT count(*) AS n FROM floodgate_state').all()[0] as { n: number }).n;
console.log(JSON.stringify({ version: process.version, allowed, rows }));
