export declare const ALGORITHM_FILES: Record<string, string[]>;
export declare function assembleScript(algorithm?: string): string;
export declare function assembleScripts(): Record<string, string>;
export declare function sha1(text: string): string;
export declare function renderModule(scripts: Record<string, string>): string;
export declare const CONSUME_FILES: Record<string, string>;
