/**
 * @packageDocumentation
 * What a store package tests itself with: `storeContract()`, the
 * conformance suite every Floodgate store passes, as vitest tests. Needs
 * vitest and fast-check (peer dependencies of this entry only).
 */
export { type StoreContractOptions, storeContract } from './testing/store-contract.js';
