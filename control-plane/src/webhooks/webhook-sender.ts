import { performance } from "node:perf_hooks";
import { Agent, request } from "undici";
import { AddressRefusedError, addressRefusal, checkedLookup, ipLiteralHost } from "./address-policy";
import { RESPONSE_EXCERPT_MAX } from "./webhook-attempt.entity";

/** Bytes of a response body read for the excerpt; the rest is never read (the connection is dropped). */
const EXCERPT_READ_BYTES = 1024;

export interface AttemptOutcome {
  /** A 2xx answer. */
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  responseExcerpt: string | null;
  /** Retrying cannot help (the address is refused): the delivery fails now. */
  permanent: boolean;
}

function refusedIn(err: unknown): AddressRefusedError | null {
  for (
    let e = err as { cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    e = e.cause as never, depth++
  ) {
    if (e instanceof AddressRefusedError) return e;
  }
  return null;
}

function describe(err: unknown, timeoutMs: number): string {
  const e = err as {
    name?: string;
    code?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (
    e?.name === "TimeoutError" ||
    e?.code === "UND_ERR_HEADERS_TIMEOUT" ||
    e?.code === "UND_ERR_BODY_TIMEOUT" ||
    e?.code === "UND_ERR_CONNECT_TIMEOUT"
  ) {
    return `timed out after ${timeoutMs} ms`;
  }
  const code = e?.code ?? e?.cause?.code;
  const message = e?.cause?.message ?? e?.message ?? String(err);
  return code ? `${code}: ${message}` : message;
}

/**
 * POSTs webhook bodies. Connections go only to addresses `checkedLookup` approved (names are resolved and
 * checked by the connector itself, so the address checked is the address connected to); IP-literal hosts
 * are checked here, since Node does not look them up. Redirects are not followed (a 3xx is a failed
 * attempt), and each attempt has one deadline for connect, headers and body.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly opts: { allowPrivateAddresses: boolean; timeoutMs: number }) {
    this.agent = new Agent({
      connect: { lookup: checkedLookup(opts.allowPrivateAddresses), timeout: opts.timeoutMs },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  }

  async send(rawUrl: string, headers: Record<string, string>, body: string): Promise<AttemptOutcome> {
    const started = performance.now();
    const done = (o: Omit<AttemptOutcome, "durationMs">): AttemptOutcome => ({
      ...o,
      durationMs: Math.round(performance.now() - started),
    });
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return done({
        ok: false,
        statusCode: null,
        error: "invalid URL",
        responseExcerpt: null,
        permanent: true,
      });
    }
    const literal = ipLiteralHost(url);
    if (literal !== null && !this.opts.allowPrivateAddresses) {
      const why = addressRefusal(literal);
      if (why !== null) {
        return done({
          ok: false,
          statusCode: null,
          error: `address refused: ${why}`,
          responseExcerpt: null,
          permanent: true,
        });
      }
    }
    try {
      const res = await request(url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "rpc-gateway-webhooks/1", ...headers },
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      const chunks: Buffer[] = [];
      let read = 0;
      for await (const chunk of res.body) {
        chunks.push(chunk as Buffer);
        read += (chunk as Buffer).length;
        if (read >= EXCERPT_READ_BYTES) break; // leaving the loop destroys the body (and its connection)
      }
      const text = Buffer.concat(chunks).subarray(0, EXCERPT_READ_BYTES).toString("utf8");
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      return done({
        ok,
        statusCode: res.statusCode,
        error: ok ? null : `HTTP ${res.statusCode}`,
        responseExcerpt: text.length > 0 ? text.slice(0, RESPONSE_EXCERPT_MAX) : null,
        permanent: false,
      });
    } catch (err) {
      const refused = refusedIn(err);
      if (refused) {
        return done({
          ok: false,
          statusCode: null,
          error: `address refused: ${refused.message}`,
          responseExcerpt: null,
          permanent: true,
        });
      }
      return done({
        ok: false,
        statusCode: null,
        error: describe(err, this.opts.timeoutMs),
        responseExcerpt: null,
        permanent: false,
      });
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
