import ipaddr from "ipaddr.js";
import { badInput } from "../common/errors";
import { AllowlistKind } from "./allowlist-entry.entity";

/**
 * Allowlist values and their normalised stored form.
 *
 * ORIGIN: an exact origin `scheme://host[:port]` (http or https, no path, query, fragment or credentials;
 * stored as the URL's origin: lower-case, default port dropped), or a wildcard host `*.example.com`
 * (matches any subdomain of example.com, any scheme; not example.com itself).
 *
 * IP: one IPv4/IPv6 address or a CIDR range. Stored canonically: IPv6 compressed per RFC 5952,
 * IPv4-mapped IPv6 addresses as IPv4, CIDR ranges as their network address (`10.1.2.3/8` -> `10.0.0.0/8`).
 *
 * Matching semantics (what the data plane implements, docs/contracts.md#allowlists): an app without entries
 * accepts every caller. With entries, a request passes when it matches ANY listed origin (its `Origin`
 * header) OR ANY listed IP (its client IP) — kinds are alternatives, not both required.
 */
export const ALLOWLIST_VALUE_MAX = 253;
const LABEL_RE = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

function validHostname(host: string): boolean {
  const labels = host.split(".");
  return host.length <= 253 && labels.length >= 1 && labels.every((l) => LABEL_RE.test(l));
}

export function normaliseOrigin(raw: string): string {
  const v = raw.trim().toLowerCase();
  const fail = () =>
    badInput(
      "value",
      "Origin must be `https://host[:port]` (no path) or a wildcard host like `*.example.com`",
    );
  if (v.length === 0 || v.length > ALLOWLIST_VALUE_MAX) throw fail();
  if (v.startsWith("*.")) {
    const host = v.slice(2);
    if (!validHostname(host) || !host.includes(".") || /^[0-9.]+$/.test(host)) throw fail();
    return `*.${host}`;
  }
  const m = /^(https?):\/\/([^/?#@]+)\/?$/.exec(v);
  if (!m) throw fail();
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw fail();
  }
  if (
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    (url.pathname !== "/" && url.pathname !== "")
  ) {
    throw fail();
  }
  const host = url.hostname;
  const isIpHost = host.startsWith("[") || ipaddr.IPv4.isValidFourPartDecimal(host);
  if (!isIpHost && !validHostname(host)) throw fail();
  return url.origin;
}

export function normaliseIp(raw: string): string {
  const v = raw.trim();
  const fail = () =>
    badInput("value", "IP must be an IPv4 or IPv6 address or CIDR range, e.g. 203.0.113.7 or 2001:db8::/32");
  if (v.length === 0 || v.length > 64 || v.includes("%")) throw fail();
  if (v.includes("/")) {
    if (ipaddr.IPv4.isValidCIDRFourPartDecimal(v)) {
      const [, bits] = ipaddr.IPv4.parseCIDR(v);
      return `${ipaddr.IPv4.networkAddressFromCIDR(v).toString()}/${bits}`;
    }
    if (ipaddr.IPv6.isValidCIDR(v)) {
      const [, bits] = ipaddr.IPv6.parseCIDR(v);
      return `${ipaddr.IPv6.networkAddressFromCIDR(v).toString()}/${bits}`;
    }
    throw fail();
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(v)) return ipaddr.IPv4.parse(v).toString();
  if (ipaddr.IPv6.isValid(v)) {
    const a = ipaddr.IPv6.parse(v);
    return a.isIPv4MappedAddress() ? a.toIPv4Address().toString() : a.toString();
  }
  throw fail();
}

export function normaliseAllowlistValue(kind: AllowlistKind, raw: string): string {
  return kind === AllowlistKind.ORIGIN ? normaliseOrigin(raw) : normaliseIp(raw);
}
