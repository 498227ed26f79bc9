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

/**
 * The client address as the request log keeps it (privacy: never the host): an IPv4 address by its /24
 * (`203.0.113.0/24`), an IPv6 address by its /48 (`2001:db8:1::/48`, a site's allocation).
 */
export function logAddressPrefix(addr: ipaddr.IPv4 | ipaddr.IPv6): string {
  if (addr.kind() === "ipv4") {
    const o = (addr as ipaddr.IPv4).octets;
    return `${o[0]}.${o[1]}.${o[2]}.0/24`;
  }
  const p = (addr as ipaddr.IPv6).parts;
  return `${p[0]!.toString(16)}:${p[1]!.toString(16)}:${p[2]!.toString(16)}::/48`;
}
