import assert from "node:assert/strict";
import { compactKeyRecord } from "../../../../data-plane/src/auth/compact";
import { defaultKeyRecord } from "../../../helpers/seed-redis";

describe("data-plane: compact key records", () => {
  it("keeps every plan field (the concurrency caps too) and shares a plan only between equal ones", () => {
    const base = defaultKeyRecord();
    const capped = { ...base.plan, maxInFlightPerKey: 7, maxHeavyInFlightPerKey: 2 };
    const a = compactKeyRecord({ ...base, plan: capped }).record;
    const b = compactKeyRecord({ ...base, appId: "other", plan: { ...capped } }).record;
    assert.deepEqual(a.plan, capped);
    assert.equal(a.plan, b.plan, "equal plans share one frozen object");
    assert.ok(Object.isFrozen(a.plan));
    const other = compactKeyRecord({ ...base, plan: { ...capped, maxInFlightPerKey: 8 } }).record;
    assert.notEqual(other.plan, a.plan, "a plan differing only in a cap is not shared");
    assert.equal(other.plan.maxInFlightPerKey, 8);
    const plain = compactKeyRecord(base).record;
    assert.equal(plain.plan.maxInFlightPerKey, undefined, "absent stays absent (the data plane's default)");
  });
});
