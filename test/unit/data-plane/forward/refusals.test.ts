import assert from "node:assert/strict";
import { concurrencyRefusal, elementRefusal } from "../../../../data-plane/src/forward/refusals";
import { Acquired } from "../../../../data-plane/src/limits/concurrency";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { blockDebug, call, setup } from "./fakes";

describe("data-plane forward: refusals before forwarding", () => {
  it("refuses by method policy first, then by the eth_getLogs range; forwards the rest", () => {
    const { asPool } = setup();
    const blocked = elementRefusal(call("debug_traceCall", []), asPool, blockDebug);
    assert.equal(blocked?.row, GatewayError.MethodBlocked);
    assert.equal(blocked?.message, "debug_traceCall is not available");
    const wide = elementRefusal(
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x2710" }]),
      asPool,
      blockDebug,
    );
    assert.equal(wide?.row, GatewayError.LogsRangeTooLarge);
    assert.equal(wide?.limit, 1000);
    assert.equal(
      elementRefusal(call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x10" }]), asPool, blockDebug),
      undefined,
    );
    assert.equal(elementRefusal(call("eth_chainId", []), asPool, blockDebug), undefined);
  });

  it("concurrency refusal names the cap that was hit", () => {
    const { deps } = setup();
    const total = concurrencyRefusal(deps.flights.flight("k"), Acquired.OverTotal, 0);
    assert.equal(total.row, GatewayError.ConcurrencyLimit);
    assert.equal(total.limit, 4);
    const heavy = concurrencyRefusal(deps.flights.flight("k"), Acquired.OverHeavy, 1);
    assert.equal(heavy.limit, 1);
    assert.equal(heavy.retryAfterMs, 1000);
    const plan = { name: "p", requestsPerSecond: 1, dailyRequestLimit: 1, monthlyRequestLimit: null };
    const own = deps.flights.planFlight("k", { ...plan, maxInFlightPerKey: 40, maxHeavyInFlightPerKey: 3 });
    assert.equal(concurrencyRefusal(own, Acquired.OverTotal, 0).limit, 40, "the plan's cap is named");
    assert.equal(concurrencyRefusal(own, Acquired.HeavyRequestTooLarge, 5).limit, 3);
  });
});
