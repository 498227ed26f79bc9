import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { badInput } from "../common/errors";
import { WEBHOOK_URL_MAX } from "./webhook-endpoint.entity";

/**
 * Why `address` may not receive webhooks, or null for a public unicast address. Refused: every range
 * ipaddr.js does not call `unicast` (loopback, private RFC 1918, CGNAT 100.64/10, link-local, unspecified
 * 0.0.0.0/8 and ::, multicast, broadcast, ULA fc00::/7, documentation, benchmarking, 6to4, Teredo, NAT64
 * and the other reserved ones), IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) forms judged
 * by their IPv4 address, and anything that is not an IP address.
 */
export function addressRefusal(address: string): string | null {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6") {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) {
      const inner = addressRefusal(v6.toIPv4Address().toString());
      return inner === null ? null : `IPv4-mapped ${inner}`;
    }
    const range = v6.range();
    if (range !== "unicast") return `${address} is a ${range} address`;
    // ::a.b.c.d (deprecated IPv4-compatible): the first 96 bits are zero; never a public IPv6 address.
    if (v6.parts.slice(0, 6).every((p) => p === 0)) return `${address} is an IPv4-compatible address`;
    return null;
  }
  const range = parsed.range();
  return range === "unicast" ? null : `${address} is a ${range} address`;
}

/** A delivery refused before any connection: the URL's host is, or resolved to, a refused address. */
export class AddressRefusedError extends Error {
  override name = "AddressRefusedError";
  readonly code = "WEBHOOK_ADDRESS_REFUSED";
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `net.connect` lookup that resolves the name itself and refuses it when any of its addresses is
 * refused (so a name cannot mix a public and a private answer). The connection then goes to an address
 * this function returned: nothing resolves the name again between the check and the connect. Handles the
 * `all: true` form Node uses with autoSelectFamily (Happy Eyeballs) as well as the single-address form.
 */
export function checkedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = addresses as LookupAddress[];
      if (list.length === 0) {
        const e: NodeJS.ErrnoException = new Error(`${hostname} has no address`);
        e.code = "ENOTFOUND";
        return callback(e, "", 0);
      }
      if (!allowPrivate) {
        for (const a of list) {
          const why = addressRefusal(a.address);
          if (why !== null) return callback(new AddressRefusedError(`${hostname} resolves to ${why}`), "", 0);
        }
      }
      if (options.all) return callback(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** The URL's host when it is an IP literal (brackets of IPv6 removed), else null. */
export function ipLiteralHost(url: URL): string | null {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) ? host : null;
}

/**
 * A webhook URL as stored: absolute http(s), no user name or password (they would be sent to whoever
 * answers, and logged with the URL), at most WEBHOOK_URL_MAX characters. An IP-literal host must pass
 * `addressRefusal` unless private addresses are allowed; a name is checked when delivering (its answer
 * can change). Returns the normalised URL (WHATWG: `http://0x7f.1/` becomes `http://127.0.0.1/`).
 */
export function validWebhookUrl(raw: string, allowPrivate: boolean): string {
  const text = raw.trim();
  if (text.length === 0 || text.length > WEBHOOK_URL_MAX) {
    throw badInput("url", `URL must be 1-${WEBHOOK_URL_MAX} characters`);
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badInput("url", "Not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw badInput("url", "URL must start with http:// or https://");
  }
  if (url.username !== "" || url.password !== "") {
    throw badInput("url", "URL must not contain a user name or password");
  }
  if (url.hostname === "") throw badInput("url", "URL must name a host");
  const literal = ipLiteralHost(url);
  if (literal !== null && !allowPrivate) {
    const why = addressRefusal(literal);
    if (why !== null) throw badInput("url", `Webhooks cannot be sent to ${why}`);
  }
  const normalised = url.toString();
  if (normalised.length > WEBHOOK_URL_MAX) {
    throw badInput("url", `URL must be 1-${WEBHOOK_URL_MAX} characters`);
  }
  return normalised;
}
