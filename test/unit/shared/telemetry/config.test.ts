import assert from "node:assert/strict";
import { loadTelemetryConfig } from "../../../../shared/src/telemetry/config";
import { startTelemetry } from "../../../../shared/src/telemetry/telemetry";

describe("telemetry config (OTEL_*)", () => {
  const load = (env: Record<string, string>) => loadTelemetryConfig("svc", env);

  it("is off with nothing set, and the SDK default sampler applies", () => {
    const c = load({});
    assert.equal(c.enabled, false);
    assert.equal(c.serviceName, "svc");
    assert.deepEqual(c.sampler, { root: "always_on", parentBased: true, ratio: 1 });
  });

  it("is on when OTEL_TRACES_EXPORTER names an exporter, or an OTLP endpoint is set", () => {
    assert.equal(load({ OTEL_TRACES_EXPORTER: "otlp" }).enabled, true);
    assert.equal(load({ OTEL_TRACES_EXPORTER: "console" }).enabled, true);
    assert.equal(load({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }).enabled, true);
    assert.equal(
      load({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" }).enabled,
      true,
    );
  });

  it("stays off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, whatever else is set", () => {
    assert.equal(
      load({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1" }).enabled,
      false,
    );
    assert.equal(load({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" }).enabled, false);
    assert.equal(load({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "TRUE" }).enabled, false);
    assert.equal(load({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "false" }).enabled, true);
  });

  it("reads the sampler and its ratio", () => {
    assert.deepEqual(
      load({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.01" }).sampler,
      { root: "traceidratio", parentBased: true, ratio: 0.01 },
    );
    assert.deepEqual(load({ OTEL_TRACES_SAMPLER: "always_off" }).sampler, {
      root: "always_off",
      parentBased: false,
      ratio: 1,
    });
    assert.equal(load({ OTEL_SERVICE_NAME: "gw-eu" }).serviceName, "gw-eu");
  });

  it("names the variable of a bad value", () => {
    assert.throws(() => load({ OTEL_TRACES_SAMPLER: "sometimes" }), /OTEL_TRACES_SAMPLER: expected one of/);
    assert.throws(
      () => load({ OTEL_TRACES_SAMPLER_ARG: "2" }),
      /OTEL_TRACES_SAMPLER_ARG: expected a ratio 0..1/,
    );
    assert.throws(
      () => load({ OTEL_TRACES_EXPORTER: "jaeger" }),
      /OTEL_TRACES_EXPORTER: expected otlp, console or none/,
    );
  });

  it("starts no SDK when off: no tracer, shutdown resolves", async () => {
    const t = startTelemetry("svc", { instrument: "none" }, {});
    assert.equal(t.enabled, false);
    assert.equal(t.tracer, undefined);
    assert.equal(t.logFields, undefined);
    await t.shutdown();
  });
});
