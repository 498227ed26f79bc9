import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as the OTLP/HTTP JSON exporter sends it, with the service that sent it. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  /** The spans this one links to (OTLP span links). */
  links: { traceId: string; spanId: string }[];
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

/**
 * A minimal OTLP/HTTP trace receiver on a loopback port (OTEL_EXPORTER_OTLP_PROTOCOL=http/json): keeps
 * every span posted to /v1/traces, answers 200 with an empty partial-success object.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Requests to any path (traces, or metrics / logs if something sent them). */
  requests = 0;
  private server: Server | undefined;
  url = "";

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.requests++;
        if (req.url === "/v1/traces") this.take(Buffer.concat(chunks).toString("utf8"));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private take(text: string): void {
    // biome-ignore lint/suspicious/noExplicitAny: the OTLP JSON shape, read loosely
    const body = JSON.parse(text) as any;
    for (const rs of body.resourceSpans ?? []) {
      const resource = attributes(rs.resource?.attributes ?? []);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            service: String(resource["service.name"] ?? ""),
            traceId: hexId(s.traceId),
            spanId: hexId(s.spanId),
            parentSpanId: hexId(s.parentSpanId),
            name: s.name,
            kind: s.kind,
            attributes: attributes(s.attributes ?? []),
            // biome-ignore lint/suspicious/noExplicitAny: as above
            links: (s.links ?? []).map((l: any) => ({ traceId: hexId(l.traceId), spanId: hexId(l.spanId) })),
          });
        }
      }
    }
  }

  /** Waits until `pred` holds over the spans received (the exporters batch every OTEL_BSP_SCHEDULE_DELAY). */
  async waitFor(pred: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.spans)) {
      if (Date.now() > deadline) {
        throw new Error(`spans not received in time; got ${this.spans.map((s) => s.name).join(", ")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

function attributes(list: readonly OtlpAttribute[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list) {
    const v = a.value;
    out[a.key] =
      v.stringValue ??
      (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
      v.boolValue ??
      v.doubleValue;
  }
  return out;
}

/** Ids as lower-case hex (the JSON exporter sends hex; protobuf-JSON would send base64). */
function hexId(id: unknown): string {
  if (typeof id !== "string" || id === "") return "";
  if (/^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16)) return id.toLowerCase();
  return Buffer.from(id, "base64").toString("hex");
}
