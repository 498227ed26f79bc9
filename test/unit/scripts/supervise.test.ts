import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { eventually } from "../../helpers/eventually";

// Plain JS script module (not compiled): loaded from the source tree.
const root = path.resolve(__dirname, "../../../..");
// biome-ignore lint/suspicious/noExplicitAny: an untyped CommonJS script
const { createSupervisor, stopTimeoutMs } = require(path.join(root, "scripts/supervise.js")) as any;

const until = (check: () => boolean, what: string) => eventually(check, what);

function supervisor() {
  const warnings: string[] = [];
  const sup = createSupervisor({
    cwd: root,
    log: () => {},
    warn: (m: string) => warnings.push(m),
    restartBaseMs: 20,
    restartMaxMs: 40,
    restartResetMs: 60_000,
    stopTimeoutMs: 5_000,
    stdout: null,
    stderr: null,
  });
  return { sup, warnings };
}

describe("scripts/supervise (npm start's restart logic)", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), "supervise-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("restarts a child whose program is missing (ENOENT: error and close, never exit), with backoff", async () => {
    const { sup, warnings } = supervisor();
    const entry = sup.run("ghost", path.join(dir, "no-such-program"), [], process.env);
    try {
      await until(() => entry.restarts >= 3, "three restarts of a program that cannot start");
      const died = warnings.filter((w) => w.includes("could not start: ENOENT"));
      assert.ok(died.length >= 3, warnings.join("\n"));
      assert.match(died[0]!, /restarting in 20 ms \(restart #1\)/);
      assert.match(died[1]!, /restarting in 40 ms \(restart #2\)/);
      assert.match(died[2]!, /restarting in 40 ms \(restart #3\)/, "capped at restartMaxMs");
    } finally {
      await sup.stop();
    }
    // A restart only ever comes from the entry's pending timer: none is left after stop().
    assert.equal(entry.timer, undefined, "no restart pending after stop");
  });

  it("restarts a child whose program is not executable (EACCES)", async () => {
    const file = path.join(dir, "not-executable");
    writeFileSync(file, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    const { sup, warnings } = supervisor();
    const entry = sup.run("noexec", file, [], process.env);
    try {
      await until(() => entry.restarts >= 2, "two restarts of a program that cannot be executed");
      assert.ok(
        warnings.some((w) => w.includes("could not start: EACCES")),
        warnings.join("\n"),
      );
    } finally {
      await sup.stop();
    }
  });

  it("restarts a child that exits once per death, and stop() ends a running one with SIGTERM", async () => {
    const { sup, warnings } = supervisor();
    const flag = path.join(dir, "ran-once");
    const up = path.join(dir, "up");
    // Exits 3 on its first run, then stays up (and says so in a file).
    const script = `const fs=require("fs");if(!fs.existsSync(${JSON.stringify(flag)})){fs.writeFileSync(${JSON.stringify(flag)},"");process.exit(3)}fs.writeFileSync(${JSON.stringify(up)},"");setInterval(()=>{},1000)`;
    const entry = sup.run("flaky", process.execPath, ["-e", script], process.env);
    await until(
      () => entry.restarts === 1 && entry.child?.pid !== undefined && entry.timer === undefined,
      "the restart",
    );
    // The second run is past its exit check: it stays up.
    await until(() => existsSync(up), "the second run up");
    assert.equal(entry.restarts, 1, warnings.join("\n"));
    assert.match(warnings.join("\n"), /died \(exit code 3\); restarting in 20 ms \(restart #1\)/);
    const child = entry.child!;
    await sup.stop();
    assert.equal(child.signalCode, "SIGTERM");
    assert.equal(entry.restarts, 1, "a child stopped by stop() is not restarted");
  });

  it("waits for the data plane's worst-case shutdown before SIGKILL, from the same variables", () => {
    // Defaults: drain 10 s + 2 x linger 0.5 s + max(usage, quota) close 5 s + 2 s + 5 s margin.
    assert.equal(stopTimeoutMs({}), 23_000);
    assert.equal(
      stopTimeoutMs({
        SHUTDOWN_DRAIN_MS: "20000",
        SHUTDOWN_LINGER_MS: "1000",
        USAGE_CLOSE_TIMEOUT_MS: "3000",
        QUOTA_CLOSE_TIMEOUT_MS: "8000",
      }),
      20_000 + 2_000 + 8_000 + 7_000,
    );
  });
});
