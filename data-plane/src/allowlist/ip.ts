import ipaddr from "ipaddr.js";
import { addressBucket } from "../../../shared/src/net/address-bucket";

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses `10.0.0.0/8`, `2001:db8::/32` or a single address; IPv4-mapped IPv6 becomes IPv4. `undefined` if invalid. */
export function parseCidr(entry: string): Cidr | undefined {
  const s = entry.trim();
  try {
    if (s.includes("/")) {
      const [addr, bits] = ipaddr.parseCIDR(s);
      if (addr.kind() === "ipv6" && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        return [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96];
      }
      return [addr, bits];
    }
    const addr = ipaddr.process(s);
    return [addr, addr.kind() === "ipv4" ? 32 : 128];
  } catch {
    return undefined;
  }
}

/** Parses a client address; IPv4-mapped IPv6 (`::ffff:1.2.3.4`) becomes IPv4. */
export function parseIp(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  try {
    return ipaddr.process(text.trim());
  } catch {
    return undefined;
  }
}

export function inRanges(addr: ipaddr.IPv4 | ipaddr.IPv6, ranges: readonly Cidr[]): boolean {
  const kind = addr.kind();
  for (const range of ranges) {
    if (range[0].kind() === kind && addr.match(range)) return true;
  }
  return false;
}

/**
 * The client address: the socket peer, or, only when the peer is a trusted proxy, the right-most
 * X-Forwarded-For hop that is not itself a trusted proxy (all hops trusted: the left-most one).
 * `undefined` when an address cannot be parsed (fails closed on IP allowlists).
 */
export function clientIp(
  peerText: string,
  forwardedFor: string,
  trusted: readonly Cidr[],
): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const peer = parseIp(peerText);
  if (peer === undefined || trusted.length === 0 || forwardedFor === "" || !inRanges(peer, trusted)) {
    return peer;
  }
  const hops = forwardedFor.split(",");
  let hop: ipaddr.IPv4 | ipaddr.IPv6 | undefined;
  for (let i = hops.length - 1; i >= 0; i--) {
    hop = parseIp(hops[i]!);
    if (hop === undefined) return undefined;
    if (!inRanges(hop, trusted)) return hop;
  }
  return hop;
}

/**
 * The client identity per-IP limits count against (`addressBucket`: IPv6 per /64). IPv4-mapped IPv6 was
 * already turned into IPv4 by `parseIp`. `unknown` when the address could not be parsed (those clients
 * share one bucket).
 */
export function ipBucket(addr: ipaddr.IPv4 | ipaddr.IPv6 | undefined): string {
  return addr === undefined ? "unknown" : addressBucket(addr);
}
