export declare const LUA_FILES: string[];
export declare function assembleScript(): string;
export declare function renderModule(script: string): string;
