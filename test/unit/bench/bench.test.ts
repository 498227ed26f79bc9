import assert from "node:assert/strict";
import { parseWrk } from "../../../bench/load";
import { nginxConfig } from "../../../bench/nginx";
import { answer, startStubUpstream } from "../../../bench/stub-upstream";

const WRK_OUTPUT = `Running 10s test @ http://127.0.0.1:39823/eth-bench/rpc?apikey=x
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  413.00us  12.01ms   88.00%
    Req/Sec    51.37k     3.12k   55.00k    80.00%
  Latency Distribution
     50%  950.00us
     75%    1.20ms
     90%    1.60ms
     99%    2.83ms
  511234 requests in 10.00s, 80.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  51098.12
Transfer/sec:      8.00MB
`;

describe("bench pieces", () => {
  it("parses wrk's output (units us/ms/s)", () => {
    const r = parseWrk(WRK_OUTPUT);
    assert.equal(r.requestsPerSec, 51098.12);
    assert.equal(r.p50Ms, 0.95);
    assert.equal(r.p90Ms, 1.6);
    assert.equal(r.p99Ms, 2.83);
    assert.equal(r.requests, 511234);
    assert.equal(r.non2xx, 7);
    assert.equal(r.socketErrors, 3);
  });

  it("stub upstream answers canned results, echoes ids, handles batches and notifications", () => {
    assert.equal(
      answer('{"jsonrpc":"2.0","id":"x","method":"eth_chainId"}'),
      '{"jsonrpc":"2.0","id":"x","result":"0x1"}',
    );
    const batch = JSON.parse(
      answer(
        '[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":null,"method":"eth_call"}]',
      ),
    );
    assert.deepEqual(
      batch.map((r: { id: unknown }) => r.id),
      [1, null],
    );
    assert.equal(JSON.parse(answer("{nope")).error.code, -32700);
  });

  for (const impl of ["uws", "node"] as const) {
    it(`stub upstream (${impl}) serves over keep-alive HTTP`, async () => {
      const stub = await startStubUpstream({ impl });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await fetch(`http://127.0.0.1:${stub.port}/any/path`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              jsonrpc: "2.0",
              id: i,
              method: "eth_getBalance",
              params: ["0x0", "latest"],
            }),
          });
          assert.deepEqual(await res.json(), { jsonrpc: "2.0", id: i, result: "0xde0b6b3a7640000" });
        }
      } finally {
        await stub.close();
      }
    });
  }

  it("stub upstream (uws) with a slow share answers that share of exchanges late (hedging bench)", async () => {
    const timed = async (slowPercent: number) => {
      const stub = await startStubUpstream({ impl: "uws", slowPercent, slowMs: 150 });
      try {
        const started = performance.now();
        const res = await fetch(`http://127.0.0.1:${stub.port}/`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
        });
        assert.deepEqual(await res.json(), { jsonrpc: "2.0", id: 1, result: "0x1" });
        return performance.now() - started;
      } finally {
        await stub.close();
      }
    };
    assert.ok((await timed(100)) >= 140, "100%: every exchange late");
    assert.ok((await timed(0)) < 140, "0%: none");
  });

  it("renders an nginx config: one worker, foreground, upstream keep-alive", () => {
    const conf = nginxConfig({ dir: "/tmp/x", port: 8081, upstreamPort: 9000, keepalive: 64 });
    assert.match(conf, /worker_processes 1;/);
    assert.match(conf, /daemon off;/);
    assert.match(conf, /server 127\.0\.0\.1:9000;\s+keepalive 64;/);
    assert.match(conf, /proxy_set_header Connection "";/);
    assert.match(conf, /listen 127\.0\.0\.1:8081;/);
  });
});
