import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./ports";
import { type StartedProcess, startProcess } from "./process";

/**
 * A private redis-server on a free loopback port (no automatic persistence), which a test may shut down
 * and start again on the same port, empty or with its data. Stopped by its own PID only.
 */
export class PrivateRedis {
  private proc: StartedProcess | undefined;
  private readonly dir = mkdtempSync(path.join(tmpdir(), "rg-private-redis-"));
  port = 0;

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    if (this.port === 0) this.port = await freePort();
    this.proc = await startProcess(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        this.dir,
      ],
      { readyLine: /Ready to accept connections/ },
    );
    return this;
  }

  /** `SHUTDOWN NOSAVE`: the process exits and its data is gone. */
  shutdownNoSave(): Promise<void> {
    return this.shutdown("NOSAVE");
  }

  /**
   * `SHUTDOWN SAVE`: the process exits after writing its data to the snapshot file, which the next
   * `start()` loads (a restart with persistence).
   */
  shutdownSave(): Promise<void> {
    return this.shutdown("SAVE");
  }

  private async shutdown(mode: "SAVE" | "NOSAVE"): Promise<void> {
    const proc = this.proc;
    if (proc === undefined) return;
    if (mode === "NOSAVE") rmSync(path.join(this.dir, "dump.rdb"), { force: true });
    spawnSync("redis-cli", ["-h", "127.0.0.1", "-p", String(this.port), "SHUTDOWN", mode]);
    await proc.stop(3000);
    this.proc = undefined;
  }

  async stop(): Promise<void> {
    await this.proc?.stop(3000);
    this.proc = undefined;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
