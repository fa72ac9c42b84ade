// @ts-check
// Two app processes share limits through one PostgreSQL, no Redis.
//
//   npm run example postgres-no-redis   (from the repository root; or: node run.js, packages built)
//
// 1. takes a schema of its own in the machine's PostgreSQL (DATABASE_URL, or 127.0.0.1:5432
//    database test), or starts a private server where none answers;
// 2. starts two instances of app.js against it;
// 3. hammers both at once as one user: the per-user limit (20) holds across both;
// 4. tries 8 passwords on each for one account, from different addresses: 5 tries in all;
// 5. drops the schema and stops every process it started.
import { spawn } from 'node:child_process';
import pg from 'pg';
import { listeningUrl } from '../example-test.mjs';
import { useSchema } from '../private-postgres.mjs';

/** @type {import('node:child_process').ChildProcess[]} */
const children = [];
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

const database = await useSchema(pg, 'floodgate_example');
try {
  const env = { ...process.env, DATABASE_URL: database.url, TABLE: `${database.schema}.floodgate_state`, PORT: '0' };
  const apps = [];
  for (const instance of ['a', 'b']) {
    const child = spawn(process.execPath, ['app.js'], { cwd: import.meta.dirname, env: { ...env, INSTANCE: instance }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    apps.push({ instance, url: await listeningUrl(child, 15_000, `app ${instance}`) });
  }

  /** Sends `count` requests to each app, 8 in flight per app, and counts statuses per app. @param {(url: string, i: number) => Promise<Response>} send @param {number} count */
  const hammer = async (send, count) =>
    Promise.all(
      apps.map(async ({ instance, url }) => {
        /** @type {Record<number, number>} */
        const statuses = {};
        let next = 0;
        const lane = async () => {
          while (next < count) {
            const response = await send(url, next++);
            statuses[response.status] = (statuses[response.status] ?? 0) + 1;
            await response.arrayBuffer();
          }
        };
        await Promise.all(Array.from({ length: 8 }, lane));
        return { instance, statuses };
      }),
    );

  const api = await hammer((url) => fetch(`${url}/api`, { headers: { 'x-user-id': 'u1' } }), 30);
  for (const { instance, statuses } of api) console.log(`api, app ${instance}: ${statuses[200] ?? 0} admitted, ${statuses[429] ?? 0} denied (429)`);
  console.log(`api, admitted in all: ${api.reduce((sum, { statuses }) => sum + (statuses[200] ?? 0), 0)} (per-user limit 20)`);

  const login = await hammer(
    (url, i) =>
      fetch(`${url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `198.51.100.${i + 1}` },
        body: JSON.stringify({ user: 'Alice', password: `guess${i}` }),
      }),
    8,
  );
  for (const { instance, statuses } of login) console.log(`login, app ${instance}: ${statuses[401] ?? 0} tried, ${statuses[429] ?? 0} denied (429)`);
  console.log(`login, tried in all: ${login.reduce((sum, { statuses }) => sum + (statuses[401] ?? 0), 0)} (per-account limit 5)`);
} finally {
  for (const child of children) {
    const ended = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await ended;
  }
  await database.drop();
}
