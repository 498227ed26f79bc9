import assert from "node:assert/strict";
import { ThreadReadiness } from "../../../../data-plane/src/threads/readiness";

describe("threads: readiness of the process = every thread ready", () => {
  it("a thread says ready only when it and every other thread are", () => {
    const shared = ThreadReadiness.allocate(3);
    const [t1, t2, t3] = [0, 1, 2].map((slot) => new ThreadReadiness(shared, slot, 3)) as [
      ThreadReadiness,
      ThreadReadiness,
      ThreadReadiness,
    ];
    assert.equal(t1.processReady(true), false, "the others have not published yet (still starting)");
    t1.publish(true);
    t2.publish(true);
    assert.equal(t1.processReady(true), false, "thread 3 not ready");
    t3.publish(true);
    assert.equal(t1.processReady(true), true);
    assert.equal(t3.processReady(true), true);
    assert.equal(t2.processReady(false), false, "its own readiness is read live, not as published");
    t2.publish(false);
    assert.equal(t1.processReady(true), false, "one thread lost its subscription: the process is not ready");
    assert.equal(t3.processReady(true), false);
  });
});
