/** SUBSTRATE TEST NODE: a test stand-in for a polkadot-sdk node (see ./node.ts for what it is and is not). */
export { parseArgs } from "./args";
export {
  type RpcMethodsMode,
  type RuntimeVersion,
  type SubstrateTestNode,
  type SubstrateTestNodeOptions,
  startSubstrateTestNode,
  type ValidatorCandidate,
} from "./node";
export * from "./scale";
export * from "./storage-keys";

/** Path of the compiled CLI entry (for spawning the node as a separate process). */
export const SUBSTRATE_TEST_NODE_MAIN = require.resolve("./main");
