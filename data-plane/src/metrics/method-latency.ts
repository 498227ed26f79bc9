import { OTHER_METHOD } from "../../../shared/src/usage/contract";
import { HotHistogram, type SnapshotValue } from "./hot-histogram";

/**
 * The methods that get a latency histogram of their own (`rpcgw_method_duration_seconds{method}`); every
 * other method is observed under `other`. A closed list keeps the series bounded whatever clients send:
 * the reads and sends that make up most traffic on EVM and Substrate chains.
 */
export const LATENCY_METHODS: readonly string[] = [
  "eth_blockNumber",
  "eth_call",
  "eth_chainId",
  "eth_estimateGas",
  "eth_feeHistory",
  "eth_gasPrice",
  "eth_getBalance",
  "eth_getBlockByHash",
  "eth_getBlockByNumber",
  "eth_getBlockReceipts",
  "eth_getCode",
  "eth_getLogs",
  "eth_getStorageAt",
  "eth_getTransactionByHash",
  "eth_getTransactionCount",
  "eth_getTransactionReceipt",
  "eth_maxPriorityFeePerGas",
  "eth_sendRawTransaction",
  "eth_subscribe",
  "eth_unsubscribe",
  "net_version",
  "web3_clientVersion",
  "debug_traceTransaction",
  "trace_block",
  "chain_getBlock",
  "chain_getBlockHash",
  "chain_getFinalizedHead",
  "chain_getHeader",
  "state_call",
  "state_getMetadata",
  "state_getRuntimeVersion",
  "state_getStorage",
  "system_health",
  "author_submitExtrinsic",
];

const NAME = "rpcgw_method_duration_seconds";
export const METHOD_LATENCY_HELP =
  "Time from request received to response written, by network and JSON-RPC method (a fixed set of methods; the rest as other)";

function label(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** One network's histograms, one per method of LATENCY_METHODS plus `other`, made when the network is first seen. */
class NetworkMethods {
  readonly histograms: HotHistogram[];
  readonly labels: string[];

  constructor(readonly network: string) {
    this.histograms = new Array(LATENCY_METHODS.length + 1);
    this.labels = new Array(LATENCY_METHODS.length + 1);
    for (let i = 0; i <= LATENCY_METHODS.length; i++) {
      this.histograms[i] = new HotHistogram();
      this.labels[i] =
        `network="${label(network)}",method="${i < LATENCY_METHODS.length ? LATENCY_METHODS[i] : OTHER_METHOD}"`;
    }
  }
}

/**
 * Per-method latency on the hot path: a method's histogram is found with one Map lookup of the method
 * name (an index into the network's pre-built histograms), so an observation allocates nothing.
 */
export class MethodLatency {
  private readonly index = new Map<string, number>(LATENCY_METHODS.map((m, i) => [m, i]));
  private readonly networks = new Map<string, NetworkMethods>();
  private last: NetworkMethods | undefined;

  /** `count` request objects of `method` on `network` answered after `seconds`. */
  observe(network: string, method: string, seconds: number, count = 1): void {
    let n = this.last;
    if (n === undefined || n.network !== network) {
      n = this.networks.get(network);
      if (n === undefined) {
        n = new NetworkMethods(network);
        this.networks.set(network, n);
      }
      this.last = n;
    }
    n.histograms[this.index.get(method) ?? LATENCY_METHODS.length]!.observe(seconds, count);
  }

  /** Prometheus text of the methods observed at least once. */
  render(out: string[]): void {
    out.push(`# HELP ${NAME} ${METHOD_LATENCY_HELP}`, `# TYPE ${NAME} histogram`);
    for (const n of this.networks.values())
      for (let i = 0; i < n.histograms.length; i++) {
        const h = n.histograms[i]!;
        if (h.count > 0) h.render(NAME, n.labels[i]!, out);
      }
  }

  /** The same series as prom-client JSON values (threads/metrics.ts sums them across threads). */
  values(out: SnapshotValue[]): void {
    for (const n of this.networks.values())
      for (let i = 0; i < n.histograms.length; i++) {
        const h = n.histograms[i]!;
        if (h.count === 0) continue;
        const method = i < LATENCY_METHODS.length ? LATENCY_METHODS[i]! : OTHER_METHOD;
        h.values(NAME, { network: n.network, method }, out);
      }
  }
}
