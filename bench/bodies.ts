/** Request bodies shared by the benchmark and the profiling run. */

export const CHAIN_ID_BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';

export const BATCH_100_BODY = JSON.stringify(
  Array.from({ length: 100 }, (_, i) => ({
    jsonrpc: "2.0",
    id: i + 1,
    method: "eth_getBalance",
    params: [`0x${(i + 1).toString(16).padStart(40, "0")}`, "latest"],
  })),
);
