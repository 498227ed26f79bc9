import assert from "node:assert/strict";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { createTracing } from "../../../../data-plane/src/telemetry/create";
import { OtelTracing, sampled } from "../../../../data-plane/src/telemetry/otel-tracing";
import { formatTraceparent, parseTraceparent } from "../../../../data-plane/src/telemetry/traceparent";
import {
  endByCategories,
  endByCategory,
  endByStatus,
  jsonRpcError,
  NO_TRACING,
  tailErrorCode,
} from "../../../../data-plane/src/telemetry/tracing";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import type { SamplerConfig } from "../../../../shared/src/telemetry/config";
import type { Telemetry } from "../../../../shared/src/telemetry/telemetry";

describe("data-plane request tracing", () => {
  describe("traceparent", () => {
    const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN = "00f067aa0ba902b7";

    it("parses a valid header and its sampled flag", () => {
      assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-01`), {
        traceId: TRACE,
        spanId: SPAN,
        sampled: true,
      });
      assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-00`), {
        traceId: TRACE,
        spanId: SPAN,
        sampled: false,
      });
      // Other flag bits do not matter; a future version may carry more fields.
      assert.equal(parseTraceparent(`00-${TRACE}-${SPAN}-03`)?.sampled, true);
      assert.equal(parseTraceparent(`01-${TRACE}-${SPAN}-01-extra`)?.traceId, TRACE);
    });

    it("ignores invalid headers (a new trace starts)", () => {
      for (const h of [
        "",
        "garbage",
        `ff-${TRACE}-${SPAN}-01`,
        `00-${TRACE.toUpperCase()}-${SPAN}-01`,
        `00-${"0".repeat(32)}-${SPAN}-01`,
        `00-${TRACE}-${"0".repeat(16)}-01`,
        `00-${TRACE}-${SPAN}-01-extra`,
        `00-${TRACE}-${SPAN}-0g`,
      ]) {
        assert.equal(parseTraceparent(h), undefined, h);
      }
    });

    it("formats a sampled header", () => {
      assert.equal(formatTraceparent(TRACE, SPAN), `00-${TRACE}-${SPAN}-01`);
    });
  });

  describe("sampling", () => {
    const parent = (s: boolean) => ({ traceId: "a".repeat(32), spanId: "b".repeat(16), sampled: s });

    it("parent-based: the incoming flag decides, else the root sampler", () => {
      const s = { root: "always_off" as const, parentBased: true, ratio: 1 };
      assert.equal(sampled(s, parent(true)), true);
      assert.equal(sampled({ ...s, root: "always_on" }, parent(false)), false);
      assert.equal(sampled(s, undefined), false);
      assert.equal(sampled({ ...s, root: "always_on" }, undefined), true);
    });

    it("not parent-based: the root sampler decides even under a sampled parent", () => {
      assert.equal(sampled({ root: "always_off", parentBased: false, ratio: 1 }, parent(true)), false);
    });

    it("traceidratio samples about its fraction", () => {
      const s = { root: "traceidratio" as const, parentBased: true, ratio: 0.1 };
      let n = 0;
      for (let i = 0; i < 20_000; i++) if (sampled(s, undefined)) n++;
      assert.ok(n > 1500 && n < 2500, `${n} of 20000 at 10%`);
      assert.equal(sampled({ ...s, ratio: 0 }, undefined), false);
    });
  });

  it("tracing off: NO_TRACING, which samples nothing", async () => {
    const t = createTracing(0, {});
    assert.equal(t, NO_TRACING);
    assert.equal(t.enabled, false);
    assert.equal(
      t.start("x", `00-${"a".repeat(32)}-${"b".repeat(16)}-01`, 0, "http", "eth", "r1"),
      undefined,
    );
    const disabled = createTracing(0, { OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" });
    assert.equal(disabled, NO_TRACING);
    await t.shutdown();
  });

  describe("OtelTracing (a real tracer, spans kept in memory)", () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracing = (root: SamplerConfig["root"] = "always_on") =>
      new OtelTracing({
        enabled: true,
        config: { enabled: true, serviceName: "t", sampler: { root, parentBased: true, ratio: 1 } },
        tracer: provider.getTracer("test"),
        logFields: undefined,
        shutdown: () => Promise.resolve(),
      } satisfies Telemetry);
    const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN = "00f067aa0ba902b7";
    const byName = (name: string) => exporter.getFinishedSpans().find((s) => s.name === name)!;
    beforeEach(() => exporter.reset());
    after(() => provider.shutdown());

    it("the root span carries every transport's attributes; children are its children", () => {
      const t = tracing().start("WS /{network}/rpc", "", performance.now(), "ws", "eth", "req-1")!;
      assert.ok(t);
      t.step("limits.admit", performance.now(), { "gateway.limits.admitted": true });
      t.child("upstream.call", { "rpc.method": "eth_call" }).end({ "upstream.id": "a" });
      endByCategory(t, ErrorCategory.Success);
      const root = byName("WS /{network}/rpc");
      assert.deepEqual(
        {
          network: root.attributes["gateway.network"],
          transport: root.attributes["gateway.transport"],
          id: root.attributes["gateway.request_id"],
          category: root.attributes["gateway.category"],
          method: root.attributes["http.request.method"],
        },
        { network: "eth", transport: "ws", id: "req-1", category: "Success", method: undefined },
      );
      assert.equal(root.status.code, 0, "unset: not failed");
      for (const name of ["limits.admit", "upstream.call"]) {
        const c = byName(name);
        assert.equal(c.spanContext().traceId, root.spanContext().traceId);
        assert.equal(c.parentSpanContext?.spanId, root.spanContext().spanId);
      }
    });

    it("an HTTP request's span has its method; a 5xx or a service error marks a span failed", () => {
      const a = tracing().start("POST /{network}/rpc", "", performance.now(), "http", "eth", "r")!;
      endByStatus(a, 502);
      const http = byName("POST /{network}/rpc");
      assert.equal(http.attributes["http.request.method"], "POST");
      assert.equal(http.attributes["http.response.status_code"], 502);
      assert.equal(http.status.code, 2, "ERROR");
      const b = tracing().start("WS /nodes/{nodeId}", "", performance.now(), "ws", "node:x", "r")!;
      endByStatus(b, 200, true);
      assert.equal(byName("WS /nodes/{nodeId}").attributes["gateway.status"], 200);
      assert.equal(byName("WS /nodes/{nodeId}").status.code, 0);
      const c = tracing().start("batch", "", performance.now(), "ws", "eth", "r")!;
      endByCategories(c, [ErrorCategory.Success, ErrorCategory.ServiceError, ErrorCategory.ClientError]);
      assert.equal(byName("batch").status.code, 2);
      const d = tracing().start("client", "", performance.now(), "ws", "eth", "r")!;
      endByCategory(d, ErrorCategory.ClientError);
      assert.equal(byName("client").status.code, 0, "a client's mistake is not the gateway's failure");
    });

    it("continues an incoming trace; an unsampled or undrawn request builds nothing", () => {
      const t = tracing("always_off").start(
        "in",
        `00-${TRACE}-${SPAN}-01`,
        performance.now(),
        "http",
        "e",
        "r",
      )!;
      t.end({});
      assert.equal(byName("in").spanContext().traceId, TRACE);
      assert.equal(byName("in").parentSpanContext?.spanId, SPAN);
      assert.equal(tracing("always_off").start("x", "", 0, "http", "e", "r"), undefined);
      assert.equal(tracing().start("x", `00-${TRACE}-${SPAN}-00`, 0, "http", "e", "r"), undefined);
    });

    it("a child with a link (a call that joined another in flight) links to that span", () => {
      const t = tracing().start("root", "", performance.now(), "http", "e", "r")!;
      const leader = `00-${TRACE}-${SPAN}-01`;
      const c = t.child("upstream.call", { "gateway.merged": true }, leader);
      assert.match(c.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      c.end();
      t.end({});
      const joined = byName("upstream.call");
      assert.equal(joined.links.length, 1);
      assert.equal(joined.links[0]!.context.traceId, TRACE);
      assert.equal(joined.links[0]!.context.spanId, SPAN);
      assert.equal(joined.attributes["gateway.merged"], true);
    });

    it("a step's and the root's durations are measured to below a millisecond", () => {
      const startedAt = performance.now();
      const t = tracing().start("timed", "", startedAt, "http", "e", "r")!;
      const stepAt = performance.now();
      while (performance.now() - stepAt < 2.3) {
        // busy: a step of 2.3 ms
      }
      t.step("timed.step", stepAt);
      t.end({});
      const ms = (d: [number, number]) => d[0] * 1e3 + d[1] / 1e6;
      const step = ms(byName("timed.step").duration);
      // At least the 2.3 ms spent (not rounded to whole milliseconds); no upper bound: a busy machine may
      // deschedule this process mid-step.
      assert.ok(step >= 2.29, `step ${step} ms`);
      assert.ok(ms(byName("timed").duration) >= step, "the root lasts at least as long as its step");
    });

    it("a call coalesced into an upstream batch: the batch size, and a link when another span's traceparent went out", () => {
      const t = tracing().start("root", "", performance.now(), "http", "e", "r")!;
      const first = t.child("first");
      const other = t.child("other");
      first.coalesced(3, first.traceparent);
      other.coalesced(3, first.traceparent);
      first.end();
      other.end();
      t.end({});
      const sent = byName("first");
      assert.equal(sent.attributes["gateway.coalesced_calls"], 3);
      assert.equal(sent.links.length, 0, "its own traceparent went upstream: nothing to link");
      const linked = byName("other");
      assert.equal(linked.attributes["gateway.coalesced_calls"], 3);
      assert.equal(linked.links.length, 1);
      assert.equal(linked.links[0]!.context.spanId, sent.spanContext().spanId);
      assert.equal(linked.links[0]!.context.traceId, sent.spanContext().traceId);
    });

    it("an error answer: its JSON-RPC code as rpc.response.status_code and error.type, kept when the span fails", () => {
      const t = tracing().start("POST /{network}/rpc", "", performance.now(), "http", "eth", "r")!;
      t.set(jsonRpcError(-32603));
      endByStatus(t, 502);
      const root = byName("POST /{network}/rpc");
      assert.equal(root.attributes["rpc.system.name"], "jsonrpc");
      assert.equal(root.attributes["rpc.response.status_code"], "-32603");
      assert.equal(root.attributes["error.type"], "-32603");
      assert.equal(root.status.code, 2, "ERROR");
    });

    it("a failure without a JSON-RPC code: error.type names the failure", () => {
      const t = tracing().start("POST /{network}/rpc", "", performance.now(), "http", "eth", "r")!;
      t.child("upstream.call").end({}, "upstream_timeout");
      endByStatus(t, 504);
      assert.equal(byName("upstream.call").attributes["error.type"], "upstream_timeout");
      assert.equal(byName("POST /{network}/rpc").attributes["error.type"], "HTTP 504");
      assert.equal(byName("POST /{network}/rpc").attributes["rpc.response.status_code"], undefined);
    });
  });

  describe("tailErrorCode", () => {
    it("reads the code of an error answer's tail, and nothing from a result", () => {
      assert.equal(tailErrorCode(',"error":{"code":-32000,"message":"header not found"}}'), -32000);
      assert.equal(tailErrorCode(',"error":{"message":"x","code": 3,"data":{"code":9}}}'), 3);
      assert.equal(tailErrorCode(',"result":{"code":1}}'), undefined);
      assert.equal(tailErrorCode(',"error":{"message":"no code"}}'), undefined);
    });
  });
});
