// node:sqlite (Node 22.5+), which @types/node 20 does not describe: what node-sqlite.ts uses of it.
declare module 'node:sqlite' {
  export class DatabaseSync {
    constructor(path: string);
    prepare(sql: string): { all(...params: unknown[]): unknown[]; run(...params: unknown[]): unknown };
    exec(sql: string): void;
  }
}
