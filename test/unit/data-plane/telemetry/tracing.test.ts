import assert from "node:assert/strict";
import { createTracing } from "../../../../data-plane/src/telemetry/create";
import { sampled } from "../../../../data-plane/src/telemetry/otel-tracing";
import { formatTraceparent, parseTraceparent } from "../../../../data-plane/src/telemetry/traceparent";
import { NO_TRACING } from "../../../../data-plane/src/telemetry/tracing";

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
    assert.equal(t.start("x", `00-${"a".repeat(32)}-${"b".repeat(16)}-01`, 0), undefined);
    const disabled = createTracing(0, { OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" });
    assert.equal(disabled, NO_TRACING);
    await t.shutdown();
  });
});
