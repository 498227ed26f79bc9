import assert from "node:assert/strict";
import { CompiledAccess, MethodRules } from "../../../../data-plane/src/access/access-rules";
import { compactKeyRecord } from "../../../../data-plane/src/auth/compact";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { AccessRecord } from "../../../../shared/src/redis/records";
import { defaultKeyRecord } from "../../../helpers/seed-redis";

const NONE: AccessRecord = {
  methodMode: "DENY",
  methods: [],
  requestsPerSecond: null,
  requestsPerDay: null,
  userAgents: [],
  jwt: null,
};

describe("data-plane: compiled access rules", () => {
  it("an allow-list lets only its methods (and namespaces) through, with a message naming the method", () => {
    const r = new MethodRules("ALLOW", ["eth_chainId", "net_*"]);
    assert.equal(r.refusal("eth_chainId"), undefined);
    assert.equal(r.refusal("net_version"), undefined);
    assert.match(r.refusal("eth_call")!, /eth_call is not on this app's method allow-list/);
  });

  it("a deny-list refuses its methods only", () => {
    const r = new MethodRules("DENY", ["eth_getLogs", "debug_*"]);
    assert.match(r.refusal("eth_getLogs")!, /eth_getLogs is on this app's method deny-list/);
    assert.match(r.refusal("Debug_TraceCall")!, /deny-list/);
    assert.equal(r.refusal("eth_call"), undefined);
  });

  it("compiles only the rules an app has; the transports read headers only for UA or JWT rules", () => {
    const caps = new CompiledAccess({ ...NONE, requestsPerSecond: 5, requestsPerDay: 100 });
    assert.equal(caps.methods, undefined);
    assert.equal(caps.requestsPerSecond, 5);
    assert.equal(caps.requestsPerDay, 100);
    assert.equal(caps.readsHeaders, false);
    assert.equal(caps.userAgentRefusal("anything"), undefined);
    const ua = new CompiledAccess({ ...NONE, userAgents: ["MyWallet/*"] });
    assert.equal(ua.readsHeaders, true);
    assert.equal(ua.userAgentRefusal("MyWallet/1"), undefined);
    assert.equal(ua.userAgentRefusal("curl/8"), GatewayError.UserAgentNotAllowed);
    assert.equal(ua.userAgentRefusal(""), GatewayError.UserAgentNotAllowed);
    const allowEmpty = new CompiledAccess({ ...NONE, methodMode: "ALLOW" });
    assert.ok(allowEmpty.methods !== undefined, "an ALLOW mode is a rule even when empty (refuses all)");
    assert.ok(allowEmpty.methods.refusal("eth_call") !== undefined);
  });

  it("key records: no rules -> no compiled object; equal rules share one compiled object", () => {
    const plain = compactKeyRecord({ ...defaultKeyRecord(), access: NONE });
    assert.equal(plain.access, undefined, "a DENY mode with nothing listed is no rule");
    assert.equal(plain.record.access, null);
    const absent = compactKeyRecord(defaultKeyRecord());
    assert.equal(absent.access, undefined);
    const rules: AccessRecord = { ...NONE, methods: ["eth_getLogs"], requestsPerSecond: 3 };
    const a = compactKeyRecord({ ...defaultKeyRecord(), access: rules });
    const b = compactKeyRecord({ ...defaultKeyRecord(), appId: "other", access: structuredClone(rules) });
    assert.ok(a.access !== undefined);
    assert.equal(a.access, b.access, "shared: the JWT verdicts tied to it survive an unchanged re-publish");
    const c = compactKeyRecord({ ...defaultKeyRecord(), access: { ...rules, requestsPerSecond: 4 } });
    assert.notEqual(c.access, a.access);
    assert.equal(c.access!.requestsPerSecond, 4);
  });
});
