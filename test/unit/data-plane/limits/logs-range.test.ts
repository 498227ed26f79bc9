import assert from "node:assert/strict";
import {
  checkedFilterParams,
  checkLogsRange,
  hasLogsRange,
} from "../../../../data-plane/src/limits/logs-range";
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
    // Other spellings a loose node might take (the method policy lets them through) are checked too.
    for (const m of ["eth_getlogs", "ETH_GETLOGS", " eth_getLogs", "eth_getLogs ", "eth_NewFilter"]) {
      assert.ok(hasLogsRange(m), m);
    }
    assert.ok(!hasLogsRange("eth_getLogsX"));
    assert.ok(!hasLogsRange(""));
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
    // A range ending at a tag while the head is unknown cannot be resolved: refused (not forwarded unlimited).
    const unknown = check({ fromBlock: "0x0", toBlock: "latest" }, -1);
    assert.equal(unknown?.row, GatewayError.LogsRangeTooLarge);
    assert.match(
      unknown!.message,
      /cannot be checked: the network's head block is not known yet.*max range 10000/,
    );
    assert.equal(check({}, -1), undefined, "latest..latest is one block whatever the head");
    assert.equal(check({ fromBlock: "safe", toBlock: "LATEST" }, -1), undefined);
    assert.ok(check({ fromBlock: "0x0", toBlock: hex(20_000) }, -1), "hex ranges need no head");
  });

  it("exempts blockHash filters, inverted ranges, params without a filter object and a limit of 0", () => {
    assert.equal(check({ blockHash: `0x${"ab".repeat(32)}` }), undefined);
    assert.equal(check({ fromBlock: hex(30_000), toBlock: hex(1) }), undefined);
    assert.equal(checkLogsRange("eth_getLogs", undefined, 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", "x", 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", [null], 50_000, 10_000), undefined);
    assert.equal(checkLogsRange("eth_getLogs", [[1, 2]], 50_000, 10_000), undefined);
    assert.equal(check({ fromBlock: "0x0", toBlock: "latest" }, 50_000, 0), undefined);
    // A blockHash next to a range does not exempt the range (a node may read the range).
    assert.ok(check({ blockHash: `0x${"ab".repeat(32)}`, fromBlock: "0x0", toBlock: hex(20_000) }));
  });

  // Review of issue 13: spellings nodes accept but the check did not read were forwarded unlimited.
  it("reads every spelling nodes accept: leading zeros, upper case, 0X, decimal strings, JSON numbers, spaces", () => {
    const wide = [
      { fromBlock: "0x000000000000000000000", toBlock: hex(20_000) },
      { fromBlock: `0x${"0".repeat(1000)}1`, toBlock: `0x${"0".repeat(40)}${(20_001).toString(16)}` },
      { fromBlock: "EARLIEST", toBlock: "LATEST" },
      { fromBlock: "Earliest", toBlock: " latest " },
      { fromBlock: "0X0", toBlock: "0X4E20" },
      { fromBlock: "0x0", toBlock: "0x4e20" },
      { fromBlock: "0", toBlock: "20000" },
      { fromBlock: "000", toBlock: "0020000" },
      { fromBlock: 0, toBlock: 20_000 },
      { fromBlock: 0, toBlock: "Finalized" },
      { fromBlock: "  0x0", toBlock: "PENDING" },
    ];
    for (const f of wide) {
      const r = check(f);
      assert.equal(r?.row, GatewayError.LogsRangeTooLarge, JSON.stringify(f).slice(0, 80));
      assert.match(
        r!.message,
        /block range too large: \d+ blocks, max range 10000/,
        JSON.stringify(f).slice(0, 80),
      );
    }
    assert.equal(check({ fromBlock: "0X000010", toBlock: "10000" }), undefined, "16..10000 fits");
    assert.equal(check({ fromBlock: 1, toBlock: 10_000 }), undefined);
    assert.equal(
      check({ fromBlock: "0x00000000000000000000000000", toBlock: "0x0" }),
      undefined,
      "one block",
    );
    // Named params (jsonrpsee nodes): the filter is read there too.
    const named = checkLogsRange(
      "eth_getLogs",
      { filter: { fromBlock: "0x0", toBlock: "latest" } },
      50_000,
      10_000,
    );
    assert.equal(named?.row, GatewayError.LogsRangeTooLarge);
  });

  it("refuses a bound it cannot read (not forwarded unlimited), naming the bound and the limit", () => {
    const unreadable: unknown[] = [
      "0xzz",
      "0x",
      "",
      "12a",
      "-1",
      -1,
      1.5,
      Number.MAX_SAFE_INTEGER + 2,
      `0x${"f".repeat(17)}`,
      `0x${"f".repeat(16)}`,
      "99999999999999999999999",
      "1e6",
      { blockNumber: "0x0" },
      ["0x0"],
      true,
    ];
    for (const v of unreadable) {
      const r = check({ fromBlock: "0x0", toBlock: v });
      assert.equal(r?.row, GatewayError.LogsRangeTooLarge, JSON.stringify(v));
      assert.match(
        r!.message,
        /^eth_getLogs block range cannot be checked: toBlock .* is not a block number or tag; max range 10000$/,
      );
      assert.equal(r!.limit, 10_000);
      const f = check({ fromBlock: v, toBlock: "0x0" });
      assert.match(f!.message, /fromBlock/, JSON.stringify(v));
    }
    // The quoted bound is bounded in length (it comes from the client).
    assert.ok(check({ fromBlock: "x".repeat(100_000) })!.message.length < 200);
  });

  it("rebuilds the filter from the five members it reads, dropping every other spelling; nothing to drop, nothing made", () => {
    const wide = JSON.parse('[{"fromBlock":"0x100","toBlock":"0x101","FromBlock":"0x0","ToBlock":"latest"}]');
    assert.deepEqual(checkedFilterParams(wide), [{ fromBlock: "0x100", toBlock: "0x101" }]);
    assert.deepEqual(wide[0].FromBlock, "0x0", "the client's params are not changed");
    const all = {
      fromBlock: "0x1",
      toBlock: "0x2",
      blockHash: null,
      address: ["0xa"],
      topics: [null, ["0xb"]],
    };
    const plain = [all, "extra"];
    assert.equal(checkedFilterParams(plain), plain, "already canonical: the same object");
    assert.deepEqual(checkedFilterParams([{ ...all, fromBloc\u212a: "0x0", blockhash: "0x9" }, "extra"]), [
      all,
      "extra",
    ]);
    // By name (reth): only `filter`, itself rebuilt.
    assert.deepEqual(checkedFilterParams({ filter: { toBlock: "0x2", TOBLOCK: "latest" }, Filter: {} }), {
      filter: { toBlock: "0x2" },
    });
    const named = { filter: { fromBlock: "0x1" } };
    assert.equal(checkedFilterParams(named), named);
    // No filter object: as it is (the node refuses it).
    for (const p of [undefined, null, [], ["0x1"], [null], [[1]], {}])
      assert.equal(checkedFilterParams(p), p);
  });
});
