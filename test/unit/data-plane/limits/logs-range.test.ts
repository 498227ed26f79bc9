import assert from "node:assert/strict";
import { checkLogsRange, hasLogsRange } from "../../../../data-plane/src/limits/logs-range";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";

const hex = (n: number) => `0x${n.toString(16)}`;
const check = (filter: unknown, head = 50_000, max = 10_000, method = "eth_getLogs") =>
  checkLogsRange(method, [filter], head, max);

describe("data plane: eth_getLogs block range check", () => {
  it("applies to eth_getLogs and eth_newFilter only", () => {
    assert.ok(hasLogsRange("eth_getLogs"));
    assert.ok(hasLogsRange("eth_newFilter"));
    assert.ok(!hasLogsRange("eth_getFilterLogs"));
    assert.ok(!hasLogsRange("eth_call"));
  });

  it("allows exactly the limit and refuses one block more, naming the range and the limit", () => {
    assert.equal(check({ fromBlock: hex(100), toBlock: hex(100 + 9_999) }), undefined);
    const r = check({ fromBlock: hex(100), toBlock: hex(100 + 10_000) });
    assert.ok(r);
    assert.equal(r.row, GatewayError.LogsRangeTooLarge);
    assert.equal(r.limit, 10_000);
    assert.equal(r.message, "eth_getLogs block range too large: 10001 blocks, max range 10000");
    assert.match(r.message, /range/);
    assert.equal(r.row.httpStatus, 400);
    assert.equal(r.row.category, "Client Error");
    const f = checkLogsRange("eth_newFilter", [{ fromBlock: "0x0", toBlock: hex(20_000) }], 50_000, 10_000);
    assert.equal(f?.message, "eth_newFilter block range too large: 20001 blocks, max range 10000");
  });

  it("resolves tags against the head: latest/safe/finalized/pending = head, earliest = 0, absent = latest", () => {
    assert.equal(check({ fromBlock: "earliest", toBlock: "latest" })?.message.includes("50001 blocks"), true);
    assert.equal(check({ fromBlock: "earliest" })?.message.includes("50001 blocks"), true);
    assert.equal(check({}), undefined); // latest..latest: 1 block
    assert.equal(check({ fromBlock: hex(50_000 - 9_999) }), undefined);
    assert.ok(check({ fromBlock: hex(50_000 - 10_000) }));
    for (const tag of ["latest", "safe", "finalized", "pending"]) {
      assert.ok(check({ fromBlock: "0x1", toBlock: tag }), tag);
      assert.equal(check({ fromBlock: tag, toBlock: tag }), undefined, tag);
    }
    // A range ending at a tag while the head is unknown cannot be resolved: left to the node.
    assert.equal(check({ fromBlock: "0x0", toBlock: "latest" }, -1), undefined);
    assert.ok(check({ fromBlock: "0x0", toBlock: hex(20_000) }, -1), "hex ranges need no head");
  });

  it("exempts blockHash filters, inverted ranges, malformed params and a limit of 0", () => {
    assert.equal(check({ blockHash: `0x${"ab".repeat(32)}` }), undefined);
    assert.equal(check({ fromBlock: hex(30_000), toBlock: hex(1) }), undefined);
    assert.equal(check({ fromBlock: "0xzz", toBlock: hex(30_000) }), undefined);
    assert.equal(check({ fromBlock: 1, toBlock: 30_000 }), undefined);
    assert.equal(checkLogsRange("eth_getLogs", undefined, 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", { fromBlock: "0x0" }, 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", [null], 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", [[1, 2]], 50_000, 10_000), undefined);
    assert.equal(check({ fromBlock: "0x0", toBlock: "latest" }, 50_000, 0), undefined);
    // Over 16 hex digits is not a quantity the node takes either.
    assert.equal(check({ fromBlock: "0x0", toBlock: `0x${"f".repeat(17)}` }), undefined);
  });
});
