/** Whether a value a callback or store returned is a promise (thenable) rather than the value itself. */
export const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => typeof (value as { then?: unknown } | null)?.then === 'function';
