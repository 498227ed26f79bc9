import { NodeType } from "./node.types";

export type Protocol = "EVM" | "SUBSTRATE";

/**
 * Operator-visible catalog of node images per protocol (newest first) and regions. The Kubernetes provider
 * runs `image`; the local provider maps a protocol to a node program on this machine (Substrate -> the
 * Substrate test node CLI, EVM -> anvil) whatever the version, and says so in `imageVersions`.
 */
export interface ImageVersionEntry {
  version: string;
  /** Container image (Kubernetes provider). */
  image: string;
  /** Container port of the node's JSON-RPC (HTTP and WebSocket on one port for both programs). */
  rpcPort: number;
}

export const IMAGE_CATALOG: Record<Protocol, ImageVersionEntry[]> = {
  SUBSTRATE: [
    { version: "v1.17.1", image: "parity/polkadot:v1.17.1", rpcPort: 9944 },
    { version: "v1.16.2", image: "parity/polkadot:v1.16.2", rpcPort: 9944 },
  ],
  EVM: [
    { version: "v1.14.12", image: "ethereum/client-go:v1.14.12", rpcPort: 8545 },
    { version: "v1.14.11", image: "ethereum/client-go:v1.14.11", rpcPort: 8545 },
  ],
};

export const DEFAULT_REGIONS = ["local", "us-east-1", "eu-west-1", "ap-southeast-1"];

export function imageVersions(protocol: Protocol): ImageVersionEntry[] {
  return IMAGE_CATALOG[protocol];
}

export function findImage(protocol: Protocol, version?: string | null): ImageVersionEntry | undefined {
  const list = IMAGE_CATALOG[protocol];
  return version == null ? list[0] : list.find((e) => e.version === version);
}

/** Resource requests per node type (Kubernetes requests; also the sizing shown before measurements exist). */
export const NODE_SIZING: Record<NodeType, { cpu: string; memory: string; storage: string }> = {
  [NodeType.FULL]: { cpu: "2", memory: "8Gi", storage: "200Gi" },
  [NodeType.ARCHIVE]: { cpu: "4", memory: "16Gi", storage: "2Ti" },
  [NodeType.VALIDATOR]: { cpu: "4", memory: "16Gi", storage: "500Gi" },
};
