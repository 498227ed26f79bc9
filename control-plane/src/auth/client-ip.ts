import ipaddr from "ipaddr.js";
import { addressBucket } from "../../../shared/src/net/address-bucket";

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function parseAddr(v: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const s = v.trim().replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(s)) return null;
  const a = ipaddr.parse(s);
  return a.kind() === "ipv6" && (a as ipaddr.IPv6).isIPv4MappedAddress()
    ? (a as ipaddr.IPv6).toIPv4Address()
    : a;
}

/** True when every entry is an IP address or CIDR range (for config validation). */
export function validTrustedProxies(list: string[]): boolean {
  return list.every((e) => (e.includes("/") ? ipaddr.isValidCIDR(e) : parseAddr(e) !== null));
}

/** `TRUSTED_PROXIES` entries (addresses or CIDR ranges) as ranges. */
export function parseTrustedProxies(list: string[]): Range[] {
  return list.map((e) => {
    if (e.includes("/")) return ipaddr.parseCIDR(e);
    const a = parseAddr(e);
    if (!a) throw new Error(`not an IP address: ${e}`);
    return [a, a.kind() === "ipv4" ? 32 : 128];
  });
}

function trusted(a: ipaddr.IPv4 | ipaddr.IPv6, ranges: Range[]): boolean {
  return ranges.some(([net, bits]) => net.kind() === a.kind() && a.match(net as never, bits));
}

/**
 * The client's IP: the socket peer, unless the peer is a trusted proxy; then `X-Forwarded-For` is read
 * from the right, skipping trusted proxies, and the first untrusted address is the client. A spoofed
 * header from an untrusted peer is ignored.
 */
export function clientIp(
  remote: string | undefined,
  xff: string | string[] | undefined,
  ranges: Range[],
): string {
  const peer = remote ? parseAddr(remote) : null;
  if (!peer) return remote ?? "unknown";
  if (ranges.length === 0 || !trusted(peer, ranges) || !xff) return peer.toString();
  const hops = (Array.isArray(xff) ? xff.join(",") : xff).split(",");
  let last = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const a = parseAddr(hops[i]!);
    if (!a) break;
    last = a;
    if (!trusted(a, ranges)) return a.toString();
  }
  return last.toString();
}

/**
 * The subject of per-address throttles (sign-up, login): `addressBucket` (IPv6 per /64, the data plane's
 * rule too). Anything unparsable is its own subject.
 */
export function throttleSubject(ip: string): string {
  const a = parseAddr(ip);
  return a ? addressBucket(a) : ip;
}
