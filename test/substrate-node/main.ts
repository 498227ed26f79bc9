/**
 * CLI of the SUBSTRATE TEST NODE (a test stand-in, not a real Substrate node: see ./node.ts).
 *
 *   node dist/test/substrate-node/main.js --rpc-port 9944 --rpc-methods Unsafe --block-time-ms 1000
 *
 * Prints `listening on <port>` once it answers RPC. SIGTERM / SIGINT close it (saving --base-path state).
 */
import { parseArgs } from "./args";
import { startSubstrateTestNode } from "./node";

async function main(): Promise<void> {
  const { options, port, unknown } = parseArgs(process.argv.slice(2));
  if (unknown.length > 0)
    process.stderr.write(`substrate test node: ignoring unknown arguments: ${unknown.join(" ")}\n`);
  const node = await startSubstrateTestNode({ ...options, port });
  const host = options.host ?? "127.0.0.1";
  process.stdout.write(
    `Substrate TEST node (stand-in, not a real node): chain=${options.chain ?? "dev"} rpc-methods=${node.effectiveRpcMethods}\n` +
      `Running JSON-RPC server: addr=${host}:${node.port}\n` +
      `listening on ${node.port}\n`,
  );
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    node.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`substrate test node: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
