import type ipaddr from "ipaddr.js";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Allowlist } from "../../../shared/src/redis/records";
import { type Cidr, inRanges, parseCidr } from "./ip";

/**
 * An app's allowlist, compiled once per cached key record.
 *
 * Semantics: no entries = everything allowed. With origin entries only, the request's Origin must match
 * one. With IP entries only, the client IP must be in one range. With both kinds, a request passes when it
 * matches ANY origin OR ANY IP range.
 *
 * Origin entries:
 * - `https://app.example.com` (has a scheme): exact match on scheme, host and port (case-insensitive).
 * - `*.example.com`: any subdomain of example.com (one or more labels), any scheme, any port; does not
 *   match `example.com` itself (list it separately).
 * - `https://*.example.com`: the same, restricted to that scheme.
 * - `app.example.com` (no scheme, no wildcard): that host with any scheme and any port.
 */
export class CompiledAllowlist {
  readonly empty: boolean;
  private readonly exact = new Set<string>();
  private readonly hosts = new Set<string>();
  private readonly wildcards: { scheme: string | undefined; suffix: string }[] = [];
  private readonly ranges: Cidr[] = [];
  private readonly hasOrigins: boolean;
  private readonly hasIps: boolean;

  constructor(list: Allowlist) {
    for (const raw of list.origins) {
      const entry = raw.trim().toLowerCase().replace(/\/+$/, "");
      if (entry === "") continue;
      const schemeAt = entry.indexOf("://");
      const scheme = schemeAt > 0 ? entry.slice(0, schemeAt) : undefined;
      const rest = schemeAt > 0 ? entry.slice(schemeAt + 3) : entry;
      if (rest.startsWith("*.")) this.wildcards.push({ scheme, suffix: rest.slice(1) });
      else if (scheme !== undefined) this.exact.add(normaliseOrigin(entry) ?? entry);
      else this.hosts.add(rest);
    }
    for (const entry of list.ips) {
      const cidr = parseCidr(entry);
      if (cidr !== undefined) this.ranges.push(cidr);
    }
    // An entry that does not parse still counts as "this app restricts IPs" (fails closed).
    this.hasOrigins = this.exact.size + this.hosts.size + this.wildcards.length > 0;
    this.hasIps = list.ips.some((s) => s.trim() !== "");
    this.empty = !this.hasOrigins && !this.hasIps;
  }

  get restrictsOrigin(): boolean {
    return this.hasOrigins;
  }

  /** Whether the origin (the `Origin` header, "" when absent) matches an origin entry. */
  originAllowed(origin: string): boolean {
    if (!this.hasOrigins) return true;
    if (origin === "" || origin === "null") return false;
    const norm = normaliseOrigin(origin.toLowerCase());
    if (norm === undefined) return false;
    if (this.exact.has(norm)) return true;
    const schemeAt = norm.indexOf("://");
    const scheme = norm.slice(0, schemeAt);
    const hostPort = norm.slice(schemeAt + 3);
    const colon = hostPort.lastIndexOf(":");
    const host = colon > 0 && !hostPort.endsWith("]") ? hostPort.slice(0, colon) : hostPort;
    if (this.hosts.has(host)) return true;
    for (const w of this.wildcards) {
      if (
        (w.scheme === undefined || w.scheme === scheme) &&
        host.endsWith(w.suffix) &&
        host.length > w.suffix.length
      ) {
        return true;
      }
    }
    return false;
  }

  /**
   * Decides a request. `ip` is resolved lazily (only when the list has IP entries). Returns the error row
   * when refused.
   */
  check(origin: string, ip: () => ipaddr.IPv4 | ipaddr.IPv6 | undefined): ErrorRow | undefined {
    if (this.empty) return undefined;
    if (this.hasOrigins && this.originAllowed(origin)) return undefined;
    if (this.hasIps) {
      const addr = ip();
      if (addr !== undefined && inRanges(addr, this.ranges)) return undefined;
      return this.hasOrigins && origin !== "" ? GatewayError.OriginNotAllowed : GatewayError.IpNotAllowed;
    }
    return GatewayError.OriginNotAllowed;
  }
}

/** `scheme://host[:port]` with default ports dropped; undefined when not an origin. */
function normaliseOrigin(origin: string): string | undefined {
  const schemeAt = origin.indexOf("://");
  if (schemeAt <= 0) return undefined;
  const scheme = origin.slice(0, schemeAt);
  let hostPort = origin.slice(schemeAt + 3);
  const slash = hostPort.indexOf("/");
  if (slash >= 0) hostPort = hostPort.slice(0, slash);
  if ((scheme === "https" && hostPort.endsWith(":443")) || (scheme === "http" && hostPort.endsWith(":80"))) {
    hostPort = hostPort.slice(0, hostPort.lastIndexOf(":"));
  }
  return `${scheme}://${hostPort}`;
}
