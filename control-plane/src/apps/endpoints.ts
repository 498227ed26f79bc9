import { Network, NetworkProtocol } from "../networks/network.entity";

export interface AppEndpoint {
  network: Network;
  httpsUrl: string;
  wssUrl: string;
  exampleCommand: string;
}

/** Integration URLs of one app key on every network (docs/contracts.md#data-plane-paths). */
export function buildEndpoints(
  networks: Network[],
  apiKey: string,
  publicHttpUrl: string,
  publicWsUrl: string,
): AppEndpoint[] {
  const k = encodeURIComponent(apiKey);
  return networks.map((network) => {
    const path = `/${encodeURIComponent(network.slug)}/rpc?apikey=${k}`;
    const httpsUrl = `${publicHttpUrl}${path}`;
    const method = network.protocol === NetworkProtocol.SUBSTRATE ? "system_health" : "eth_blockNumber";
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] });
    const exampleCommand = `curl -s -X POST -H 'Content-Type: application/json' --data '${body}' '${httpsUrl}'`;
    return { network, httpsUrl, wssUrl: `${publicWsUrl}${path}`, exampleCommand };
  });
}
