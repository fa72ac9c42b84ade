import type { RedisLibrary } from '../src/stores/redis/library.js';
export declare function libraryFiles(): { fast: URL[]; general: URL[] };
export declare function assembleLibrary(): RedisLibrary;
export declare function renderModule(library: RedisLibrary): string;
export declare function sha1(text: string): string;
