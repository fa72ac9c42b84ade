import type { RedisLibrary } from '../src/stores/redis/library.js';
export declare const FILES: string[];
export declare function sha1(text: string): string;
export declare function assembleLibrary(): RedisLibrary;
export declare function renderModule(library: RedisLibrary): string;
