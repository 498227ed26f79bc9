import type ipaddr from "ipaddr.js";

/**
 * The client identity per-address limits count against (the data plane's public endpoint and WebSocket
 * caps, the control plane's sign-up and log-in throttles): an IPv4 address as is, an IPv6 address by its
 * /64 (one subscriber's allocation: a host picks any of its 2^64 addresses at will, so per-address buckets
 * would be no limit at all), e.g. `2001:db8:1:2::/64`. Callers turn IPv4-mapped IPv6 into IPv4 first.
 */
export function addressBucket(addr: ipaddr.IPv4 | ipaddr.IPv6): string {
  if (addr.kind() === "ipv4") return addr.toString();
  const p = (addr as ipaddr.IPv6).parts;
  return `${p[0]!.toString(16)}:${p[1]!.toString(16)}:${p[2]!.toString(16)}:${p[3]!.toString(16)}::/64`;
}
