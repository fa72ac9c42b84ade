/*
 * Worker processes: each benchmark that must not share a heap, a JIT or a CPU
 * with the harness runs in a child started with `node --import tsx`, and
 * talks to it over IPC. Every child started here is killed (by its PID) when
 * the harness exits, whatever happens.
 */
import { type ChildProcess, fork } from 'node:child_process';

const running = new Set<ChildProcess>();
/** Processes started elsewhere (redis-server) that must not outlive the harness either. */
const adopted = new Set<number>();

function killAll(): void {
  for (const child of running) child.kill('SIGKILL');
  for (const pid of adopted) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.once('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAll();
    process.exit(130);
  });
}

/** Kills `pid` when the harness exits, unless the returned function is called first (the process was stopped normally). */
export function adopt(pid: number): () => void {
  adopted.add(pid);
  return () => adopted.delete(pid);
}

export interface Worker {
  readonly pid: number;
  /** The next message from the child, or a rejection if it exits or stays silent for `timeoutMs`. */
  receive<T>(timeoutMs?: number): Promise<T>;
  send(message: unknown): void;
  /** Kills the child and waits for it to be gone. */
  stop(): Promise<void>;
  /** Waits up to `timeoutMs` for the child to exit by itself (e.g. to write a --cpu-prof profile), then kills it. */
  finish(timeoutMs?: number): Promise<void>;
}

export interface WorkerOptions {
  /** Extra Node flags, e.g. `--expose-gc`. */
  nodeFlags?: string[];
  /** Data for the child, passed as one JSON argument (read it with `workerInput()`). */
  input?: unknown;
}

/** Starts `module` (a .ts file next to this one, an ES module) as a child process. */
export function startWorker(module: string, options: WorkerOptions = {}): Worker {
  const child = fork(new URL(module, import.meta.url).pathname, options.input === undefined ? [] : [JSON.stringify(options.input)], {
    // tsx's ESM loader only: its CommonJS hook would load a second copy of an ESM-only package that a
    // CommonJS one requires (@nestjs/throttler requiring @nestjs/core 12), where Node's own require() shares it.
    execArgv: ['--import', 'tsx/esm', ...(options.nodeFlags ?? [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  running.add(child);
  const inbox: unknown[] = [];
  let waiting: ((message: unknown) => void) | undefined;
  let exitError: Error | undefined;
  let failWaiting: ((error: Error) => void) | undefined;
  child.on('message', (message) => {
    if (waiting) {
      const deliver = waiting;
      waiting = undefined;
      deliver(message);
    } else {
      inbox.push(message);
    }
  });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      exitError = new Error(`worker ${module} exited (code ${code}, signal ${signal})`);
      failWaiting?.(exitError);
      resolve();
    });
  });

  return {
    pid: child.pid as number,
    receive<T>(timeoutMs = 120_000): Promise<T> {
      if (inbox.length > 0) return Promise.resolve(inbox.shift() as T);
      if (exitError) return Promise.reject(exitError);
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting = undefined;
          reject(new Error(`worker ${module} sent nothing for ${timeoutMs} ms`));
        }, timeoutMs);
        waiting = (message) => {
          clearTimeout(timer);
          resolve(message as T);
        };
        failWaiting = (error) => {
          clearTimeout(timer);
          reject(error);
        };
      });
    },
    send(message) {
      child.send(message as object);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async finish(timeoutMs = 10_000) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
      await this.stop();
    },
  };
}

/** Runs `module` with `input`, returns the one message it sends back, and waits for it to exit. */
export async function runWorker<T>(module: string, input: unknown, nodeFlags: string[] = [], timeoutMs?: number): Promise<T> {
  const worker = startWorker(module, { input, nodeFlags });
  try {
    const result = await worker.receive<T>(timeoutMs);
    await worker.finish();
    return result;
  } finally {
    await worker.stop();
  }
}

/** In a worker: the JSON input the parent passed. */
export function workerInput<T>(): T {
  return JSON.parse(process.argv[2] ?? 'null') as T;
}

/** In a worker: sends a message to the parent and resolves once it has left this process. */
export function reply(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    (process.send as NonNullable<typeof process.send>)(message, undefined, undefined, (error) => (error ? reject(error) : resolve()));
  });
}
