/** Storage-key derivation and SS58 live in shared/src/substrate (the node worker derives the same keys). */
export * from "../../shared/src/substrate/storage-keys";
