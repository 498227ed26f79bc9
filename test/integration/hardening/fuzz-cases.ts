import { connect } from "node:net";

/**
 * Hostile inputs for the fuzz test, all derived from one seed (mulberry32) so that a failure reproduces
 * with FUZZ_SEED. Requests are raw bytes sent over `net` sockets: fetch / undici refuse to send bad paths,
 * CRLF in headers or broken framing, which is exactly what is being tested.
 */
export class Rand {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** [0, 1) */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  bool(p = 0.5): boolean {
    return this.next() < p;
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  /** Printable-ish junk with the odd control or high byte. */
  junk(max: number): string {
    const n = 1 + this.int(max);
    let s = "";
    for (let i = 0; i < n; i++) {
      const r = this.next();
      s +=
        r < 0.8
          ? String.fromCharCode(33 + this.int(94))
          : r < 0.9
            ? this.pick(["ü", "😀", "\u202e", "é"])
            : " ";
    }
    return s;
  }
}

/** What the routes need to be reached for real (a valid key sometimes gets past auth into the pipeline). */
export interface Targets {
  network: string;
  appKey: string;
  nodeId: string;
  nodeKey: string;
}

const BAD_ESCAPES = [
  "%",
  "%zz",
  "%C0%AF",
  "%00",
  "%E0%A4%A",
  "%ff%fe",
  "%25",
  "%2e%2e",
  "%%",
  "%u0041",
  "%0d%0a",
  "%2F",
];
const RAW_SEGMENTS = ["..", ".", "", "ü", "😀", "\u202e", "\\", ";", "%2e%2e%2f", "~", "'\"<>"];
/** Bytes uWS's parser does not accept in a target: such a request stalls until its idle timeout. */
const PARSER_BREAKING_SEGMENTS = ["a b", "\t", "\0", "x\0y"];

/** A path segment: valid, malformed percent-encoding, unicode, NUL, `..`, huge. */
function segment(r: Rand, valid: string): string {
  const k = r.int(20);
  if (k < 7) return valid;
  if (k < 12) return r.pick(BAD_ESCAPES) + (r.bool() ? valid : "");
  if (k < 15) return r.pick(RAW_SEGMENTS);
  if (k < 16) return r.pick(PARSER_BREAKING_SEGMENTS);
  if (k < 18) return encodeURIComponent(r.junk(40));
  return "A".repeat(r.bool(0.3) ? 64 * 1024 : 1 + r.int(4096));
}

function query(r: Rand, t: Targets): string {
  const k = r.int(8);
  if (k === 0) return "";
  if (k === 1) return `?apikey=${t.appKey}`;
  if (k === 2) return `?apikey=${r.pick(BAD_ESCAPES)}`;
  if (k === 3) return `?apikey=${t.nodeKey}&apikey=${encodeURIComponent(r.junk(20))}`;
  if (k === 4) return `?${r.bool(0.2) ? r.junk(200) : encodeURIComponent(r.junk(200))}`;
  if (k === 5) return `?apikey=${"k".repeat(8192)}`;
  if (k === 6) return "??&&==#frag";
  return `?apikey=${encodeURIComponent(r.junk(30))}&x=%zz`;
}

/** A request target on one of the data plane's route families (the family is returned for the counts). */
export function dataPlanePath(r: Rand, t: Targets): { family: string; path: string } {
  const family = r.pick([
    "app",
    "jsonrpc",
    "public",
    "nodeKeyInPath",
    "nodeQuery",
    "health",
    "metrics",
    "other",
  ]);
  const net = segment(r, t.network);
  let path: string;
  switch (family) {
    case "app":
      path = `/${net}/rpc${query(r, t)}`;
      break;
    case "jsonrpc":
      path = `/${net}/jsonrpc${query(r, t)}`;
      break;
    case "public":
      path = `/${net}/public${r.bool(0.3) ? query(r, t) : ""}`;
      break;
    case "nodeKeyInPath":
      path = `/nodes/${segment(r, t.nodeId)}/${segment(r, t.nodeKey)}${r.bool(0.2) ? query(r, t) : ""}`;
      break;
    case "nodeQuery":
      path = `/nodes/${segment(r, t.nodeId)}${query(r, t)}`;
      break;
    case "health":
      path = r.pick(["/healthz", "/readyz", "/healthz/", "/readyz?x=%"]);
      break;
    case "metrics":
      path = r.pick(["/metrics", "/metrics?name[]=x", "/metrics/%zz"]);
      break;
    default:
      path = r.pick([
        "/",
        "//",
        "/../../etc/passwd",
        "/%",
        `/${segment(r, "x")}/${segment(r, "y")}/${segment(r, "z")}`,
        "*",
      ]);
  }
  return { family, path };
}

export function controlPlanePath(r: Rand): { family: string; path: string } {
  const family = r.pick(["graphql", "console", "other"]);
  if (family === "graphql") {
    return {
      family,
      path: r.pick([
        "/graphql",
        "/graphql?query=%7B__typename%7D",
        `/graphql?query=${encodeURIComponent(r.junk(100))}`,
        "/graphql?%zz",
        `/graphql/${segment(r, "x")}`,
        "/graphql?query={networks{slug}}&variables=%",
      ]),
    };
  }
  if (family === "console") {
    return {
      family,
      path: r.pick([
        "/console/",
        "/console",
        "/console/index.html",
        "/console/../package.json",
        "/console/%2e%2e/%2e%2e/package.json",
        "/console/..%2f..%2fpackage.json",
        `/console/${segment(r, "assets")}/${segment(r, "x.js")}`,
        "/console/assets/%",
        "/console/\0",
        `/console/${"a".repeat(64 * 1024)}`,
      ]),
    };
  }
  return {
    family,
    path: `/${segment(r, "x")}${r.bool() ? `?${r.bool(0.2) ? r.junk(50) : encodeURIComponent(r.junk(50))}` : ""}`,
  };
}

/** Header lines (without the final CRLF): garbage Origin / X-Forwarded-For / apikey, huge, many, CRLF. */
export function hostileHeaders(r: Rand, t: Targets | undefined): string[] {
  const h: string[] = [];
  const n = r.int(4);
  for (let i = 0; i < n; i++) {
    switch (r.int(11)) {
      case 0:
        h.push(
          `Origin: ${r.pick(["null", "http://evil.example", r.junk(100), "http://[::1", "\u00ff\u00fe"])}`,
        );
        break;
      case 1:
        h.push(
          `X-Forwarded-For: ${r.pick(["1.2.3.4, ::1, garbage", "999.1.1.1", "::ffff:127.0.0.1", r.junk(60), Array(500).fill("10.0.0.1").join(",")])}`,
        );
        break;
      case 2:
        h.push(
          `apikey: ${r.pick([t?.appKey ?? "x", t?.nodeKey ?? "y", "%", r.junk(50), "k".repeat(10_000)])}`,
        );
        break;
      case 3:
        h.push(`X-Big: ${"b".repeat(r.bool(0.5) ? 16 * 1024 : 60 * 1024)}`);
        break;
      case 4:
        h.push("X-Injected: a\r\nX-Second: b"); // CRLF in a value: on the wire, a second header
        break;
      case 5:
        // Shapes uWS's parser does not accept (a request with one stalls until uWS's idle timeout):
        // more than its header limit, a bare LF / CR or NUL in a value, a line without a colon, a space
        // in a name. Rarer than the rest so that most cases reach the gateway's own handlers.
        if (r.bool(0.5)) break;
        if (r.bool(0.2)) for (let j = 0; j < 120; j++) h.push(`X-Many-${j}: ${j}`);
        else
          h.push(
            r.pick([
              "X-Bare-LF: a\nb",
              "X-Bare-CR: a\rb",
              "NoColonHeader",
              "Bad Name: x",
              ": empty-name",
              "X-Nul: a\0b",
            ]),
          );
        break;
      case 6:
        h.push(
          `Authorization: ${r.pick(["Bearer ", "Bearer %", `Bearer ${r.junk(200)}`, "Basic ???", "x".repeat(9000)])}`,
        );
        break;
      case 7:
        h.push(`X-Request-Id: ${r.junk(80)}`);
        break;
      case 8:
        h.push(
          r.pick([
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: %%%",
            "Expect: 100-continue",
          ]),
        );
        break;
      case 9:
        h.push(`X-Utf8: ${r.pick(["ü", "😀", "\u202e"])}`);
        break;
      default:
        h.push(`${r.junk(20).replace(/[\s:]/g, "-")}: ${r.junk(40)}`);
    }
  }
  return h;
}

/** A request body: valid calls, batches, garbage, deep nesting, BOM, oversize. */
export function hostileBody(r: Rand): Buffer {
  switch (r.int(12)) {
    case 0:
      return Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}');
    case 1:
      return Buffer.from(
        JSON.stringify(
          Array.from({ length: 1 + r.int(120) }, (_, i) => ({
            jsonrpc: "2.0",
            id: i,
            method: "eth_blockNumber",
          })),
        ),
      );
    case 2:
      return Buffer.from(`${"[".repeat(20_000)}${"]".repeat(20_000)}`);
    case 3:
      return Buffer.from(`${'{"a":'.repeat(5_000)}1${"}".repeat(5_000)}`);
    case 4:
      return r.bytes(1 + r.int(2048));
    case 5:
      return Buffer.from(`\ufeff{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`);
    case 6:
      return Buffer.from(
        `{"jsonrpc":"2.0","id":${r.pick(["1e999", "-0", "{}", "[]", '"\\ud800"', "99999999999999999999999999"])},"method":"${r.pick(["eth_chainId", "__proto__", "constructor", "", "admin_peers", "\\u0000"])}","params":${r.pick(["[]", "{}", "null", "1", '"x"', '{"__proto__":{"x":1}}'])}}`,
      );
    case 7:
      return Buffer.alloc(0);
    case 8:
      return Buffer.alloc(r.bool(0.2) ? 1024 * 1024 + 10 : 1 + r.int(64 * 1024), 0x20);
    case 9:
      return Buffer.from(
        `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"data":"0x${"ab".repeat(r.int(10_000))}"},"latest"]}`,
      );
    case 10:
      return Buffer.from("[]");
    default:
      return Buffer.from(r.junk(300));
  }
}

/** A whole raw HTTP/1.1 request: method, target, headers, framing (content-length, chunked, both). */
export function rawRequest(
  r: Rand,
  host: string,
  path: string,
  t: Targets | undefined,
  jsonBody = true,
): Buffer {
  const method = r.pick([
    "POST",
    "POST",
    "POST",
    "GET",
    "OPTIONS",
    "PUT",
    "DELETE",
    "PATCH",
    "HEAD",
    "GARBAGE",
    "get",
  ]);
  const body = method === "GET" || method === "HEAD" ? Buffer.alloc(0) : hostileBody(r);
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${host}`];
  if (r.bool(0.85))
    lines.push(
      `Content-Type: ${jsonBody ? r.pick(["application/json", "application/json; charset=utf-8", "application/jsonx", "text/plain", "APPLICATION/JSON", ""]) : "application/json"}`,
    );
  lines.push(...hostileHeaders(r, t));
  lines.push("Connection: close");
  const framing = r.int(10);
  let payload: Buffer = body;
  if (framing === 0 && body.length > 0) {
    lines.push("Transfer-Encoding: chunked");
    payload = Buffer.concat([
      Buffer.from(`${body.length.toString(16)}\r\n`),
      body,
      Buffer.from("\r\n0\r\n\r\n"),
    ]);
  } else if (framing === 1 && body.length > 0) {
    // Both framings (request smuggling shape): the server must pick one or refuse, never hang or crash.
    lines.push("Transfer-Encoding: chunked", `Content-Length: ${body.length}`);
    payload = Buffer.concat([
      Buffer.from(`${body.length.toString(16)}\r\n`),
      body,
      Buffer.from("\r\n0\r\n\r\n"),
    ]);
  } else if (framing === 2) {
    lines.push(`Content-Length: ${r.pick(["-1", "abc", "1e3", "99999999999999999999", " 5"])}`);
    payload = Buffer.alloc(0);
  } else if (body.length > 0 || r.bool()) {
    lines.push(`Content-Length: ${body.length}`);
  }
  // UTF-8, as a browser or curl sends non-ASCII: latin1 would turn "😀" into a NUL among other bytes.
  return Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "utf8"), payload]);
}

/** Raw TCP garbage: random bytes, broken request lines, TLS / HTTP2 prefaces, partial requests. */
export function tcpGarbage(r: Rand, host: string): { bytes: Buffer; hangUp: boolean } {
  const hangUp = r.bool(0.3); // close right after writing, without reading
  switch (r.int(9)) {
    case 0:
      return { bytes: r.bytes(1 + r.int(4096)), hangUp };
    case 1:
      return {
        bytes: Buffer.concat([Buffer.from("POST /x/rpc HTTP/1.1\r\n"), r.bytes(1 + r.int(512))]),
        hangUp,
      };
    case 2:
      return {
        bytes: Buffer.from([
          0x16,
          0x03,
          0x01,
          0x02,
          0x00,
          0x01,
          0x00,
          0x01,
          0xfc,
          0x03,
          0x03,
          ...r.bytes(64),
        ]),
        hangUp,
      };
    case 3:
      return { bytes: Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), hangUp };
    case 4:
      return {
        bytes: Buffer.from(`GET /${"a".repeat(100 * 1024)} HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
        hangUp,
      };
    case 5:
      return {
        bytes: Buffer.from(
          `POST /x/public HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 100\r\n\r\n{"jsonrpc"`,
        ),
        hangUp: true,
      };
    case 6:
      return { bytes: Buffer.from("\r\n\r\n\r\n\r\n"), hangUp };
    case 7:
      return { bytes: Buffer.from(`GET / HTTP/9.9\r\nHost: ${host}\r\n\r\n`), hangUp };
    default:
      return { bytes: Buffer.from(`${r.junk(30)} ${r.junk(30)} ${r.junk(10)}\r\n\r\n`, "latin1"), hangUp };
  }
}

/** The request declares a Content-Length (a valid one) larger than the body it carries. */
export function incompleteBody(raw: Buffer): boolean {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) return true;
  const m = /\r\ncontent-length: *(\d+)\r\n/i.exec(raw.subarray(0, end + 2).toString("latin1"));
  return m !== null && Number(m[1]) > raw.length - end - 4;
}

export interface RawAnswer {
  bytes: Buffer;
  /** The connection was closed by the server (or errored) before `timeoutMs`. */
  closed: boolean;
  timedOut: boolean;
}

/**
 * Sends `bytes` on a fresh connection and reads until the server closes it, a complete response has
 * arrived (Content-Length or chunked end), or `timeoutMs` passes.
 */
export function exchangeRaw(
  port: number,
  bytes: Buffer,
  timeoutMs: number,
  hangUp = false,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    const isHead = bytes.subarray(0, 5).toString("latin1") === "HEAD ";
    let settled = false;
    const done = (closed: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ bytes: Buffer.concat(chunks), closed, timedOut });
    };
    const timer = setTimeout(() => done(false, true), timeoutMs);
    sock.on("connect", () => {
      sock.write(bytes, () => {
        if (hangUp) done(true, false);
      });
    });
    sock.on("data", (d: Buffer) => {
      chunks.push(d);
      if (responseComplete(Buffer.concat(chunks), isHead)) done(false, false);
    });
    sock.on("end", () => done(true, false));
    sock.on("close", () => done(true, false));
    sock.on("error", () => done(true, false));
  });
}

export interface ParsedResponse {
  status: number;
  headers: Map<string, string>;
  body: Buffer;
}

/** Parses an HTTP/1.1 response (status line, headers, body by Content-Length or chunked); undefined if not one. */
export function parseResponse(whole: Buffer, isHead = false): ParsedResponse | undefined {
  const buf = skipInterim(whole);
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const head = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3})(?: .*)?$/.exec(head[0] ?? "");
  if (m === null) return undefined;
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const i = line.indexOf(":");
    if (i <= 0) return undefined;
    headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  let body = buf.subarray(end + 4);
  // A HEAD answer announces the length of a body it does not send.
  if (isHead) return { status: Number(m[1]), headers, body: Buffer.alloc(0) };
  const te = headers.get("transfer-encoding");
  if (te?.toLowerCase() === "chunked") {
    const parts: Buffer[] = [];
    let rest = body;
    for (;;) {
      const nl = rest.indexOf("\r\n");
      if (nl < 0) return undefined;
      const size = Number.parseInt(rest.subarray(0, nl).toString("latin1"), 16);
      if (!Number.isFinite(size)) return undefined;
      if (size === 0) break;
      parts.push(rest.subarray(nl + 2, nl + 2 + size));
      rest = rest.subarray(nl + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else {
    const cl = headers.get("content-length");
    if (cl !== undefined) {
      const n = Number(cl);
      if (!Number.isInteger(n) || body.length < n) return undefined;
      body = body.subarray(0, n);
    }
  }
  return { status: Number(m[1]), headers, body };
}

/** Drops interim 1xx responses (`Expect: 100-continue` gets a 100 before the real answer). */
export function skipInterim(buf: Buffer): Buffer {
  let b = buf;
  while (/^HTTP\/1\.1 1\d\d/.test(b.subarray(0, 12).toString("latin1"))) {
    const end = b.indexOf("\r\n\r\n");
    if (end < 0) break;
    b = b.subarray(end + 4);
  }
  return b;
}

function responseComplete(whole: Buffer, isHead: boolean): boolean {
  const buf = skipInterim(whole);
  if (buf.length === 0) return false;
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return false;
  if (isHead) return true;
  const head = buf.subarray(0, end).toString("latin1").toLowerCase();
  if (/\r\ntransfer-encoding: *chunked/.test(head)) return buf.subarray(end).includes("\r\n0\r\n\r\n");
  const cl = /\r\ncontent-length: *(\d+)/.exec(head);
  if (cl !== null) return buf.length - end - 4 >= Number(cl[1]);
  // 204 / 304 carry no body.
  return /^http\/1\.1 (204|304)/.test(head);
}

/** One WebSocket frame from the client (masked), for raw frame garbage after an upgrade. */
export function wsFrame(
  opcode: number,
  payload: Buffer,
  opts: { fin?: boolean; mask?: boolean; lie?: bigint } = {},
): Buffer {
  const fin = opts.fin ?? true;
  const mask = opts.mask ?? true;
  const len = payload.length;
  const head: number[] = [(fin ? 0x80 : 0) | (opcode & 0x0f)];
  const lenBuf: number[] = [];
  let first: number;
  if (opts.lie !== undefined) {
    first = 127;
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(opts.lie);
    lenBuf.push(...b);
  } else if (len < 126) {
    first = len;
  } else if (len < 65536) {
    first = 126;
    lenBuf.push(len >> 8, len & 0xff);
  } else {
    first = 127;
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(len));
    lenBuf.push(...b);
  }
  head.push((mask ? 0x80 : 0) | first, ...lenBuf);
  if (!mask) return Buffer.concat([Buffer.from(head), payload]);
  const key = Buffer.from([1, 2, 3, 4]);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i] = masked[i]! ^ key[i % 4]!;
  return Buffer.concat([Buffer.from(head), key, masked]);
}
