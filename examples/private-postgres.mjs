// @ts-check
// A PostgreSQL for the examples that need one: the machine's (DATABASE_URL, or
// 127.0.0.1:5432 database `test` as user postgres) when it answers, in a schema
// of the example's own, dropped when it is done; else a private server started
// from the Debian packages' binaries (initdb + postgres, as the postgres user
// when run as root) on a free port, stopped by PID. Never a table of anyone else.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** initdb, postgres, pg_isready: Debian keeps them in /usr/lib/postgresql/<version>/bin. @param {string} name */
function binary(name) {
  const root = '/usr/lib/postgresql';
  const version = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  return version === undefined ? name : join(root, version, 'bin', name);
}

/** @returns {Promise<number>} */
const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });

/** @typedef {{ Client: new (config: { connectionString: string, connectionTimeoutMillis?: number }) => { connect(): Promise<unknown>, query(sql: string): Promise<unknown>, end(): Promise<void> } }} Pg */

/** @param {Pg} pg @param {string} url */
async function answers(pg, url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

/** A private server. @param {Pg} pg @returns {Promise<{ url: string, stop(): Promise<void> }>} */
async function startPrivate(pg) {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-example-postgres-'));
  chmodSync(dir, 0o777);
  const root = process.getuid?.() === 0;
  const ids = root ? { uid: Number((await run('id', ['-u', 'postgres'])).stdout), gid: Number((await run('id', ['-g', 'postgres'])).stdout) } : {};
  await run(binary('initdb'), ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync'], ids);
  const port = await freePort();
  const child = spawn(binary('postgres'), ['-D', join(dir, 'data'), '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1'], {
    stdio: 'ignore',
    ...ids,
  });
  const orphan = () => child.kill('SIGKILL');
  process.once('exit', orphan);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  for (let i = 0; !(await answers(pg, url)); i++) {
    if (i > 300 || child.exitCode !== null) throw new Error('the private PostgreSQL did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    async stop() {
      process.off('exit', orphan);
      const ended = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await ended;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A schema of the example's own: its name, the server's URL, and a drop() that removes it
 * (and stops the private server, if one was started).
 * @param {Pg} pg the example's own pg (examples/ is no package, and resolves none)
 * @param {string} name the schema, e.g. 'floodgate_example'
 */
export async function useSchema(pg, name) {
  const given = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const server = (await answers(pg, given)) ? undefined : await startPrivate(pg);
  const url = server?.url ?? given;
  const schema = `${name}_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  return {
    url,
    schema,
    async drop() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
      await server?.stop();
    },
  };
}
