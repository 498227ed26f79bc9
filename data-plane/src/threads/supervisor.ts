import { randomBytes } from "node:crypto";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { createLogger } from "../../../shared/src/log/logger";
import { serveMetrics } from "../../../shared/src/metrics/server";
import { KeyLookupThrottle } from "../auth/lookup-throttle";
import { allocateSharedCache } from "../cache/shared-response-cache";
import { type DataPlaneConfig, shutdownBudgetMs } from "../config";
import { allocateTenantTables } from "../limits/tenant-counts";
import { type MetricsSnapshot, PromMetrics } from "../metrics/metrics";
import { collectRuntimeMetrics } from "../metrics/runtime";
import { allocateQuotaTables } from "../ratelimit/limits";
import { WindowCounts } from "../ratelimit/window-counts";
import { SharedBufferBudget } from "../upstream/buffer-budget";
import { installFaultPolicy } from "./fault-policy";
import { renderProcessMetrics, type ThreadSnapshot } from "./metrics";
import type { FromThread, ThreadData, ToThread } from "./protocol";
import { ThreadReadiness } from "./readiness";

/** A port free on `host` now (the kernel's pick for port 0; closed again at once). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** How long a shutdown waits for every thread to close its listen socket before it drains anyway. */
const UNLISTEN_TIMEOUT_MS = 1_000;
/** How long a scrape waits for every thread's snapshot before a missing one's last snapshot stands in. */
const COLLECT_TIMEOUT_MS = 1_000;

interface Thread {
  readonly index: number;
  readonly worker: Worker;
  listening: boolean;
  /** Its listen socket is closed (the first step of a shutdown). */
  unlistened: boolean;
  exited: boolean;
  /** The last snapshot it sent (stands in when it misses a scrape). */
  last: MetricsSnapshot | undefined;
}

interface Collection {
  readonly fresh: Map<number, MetricsSnapshot>;
  readonly done: () => void;
}

/**
 * The main thread of a data plane run with DATA_PLANE_THREADS = N > 1. It serves nothing itself: it starts N
 * worker threads (threads/worker.ts), each a whole data plane (`startDataPlane`) with its own uWS app
 * listening on the same host:port. uWS listens with SO_REUSEPORT on Linux, so the kernel spreads incoming
 * connections over the N listen sockets (by a hash of the connection's addresses and ports; a connection
 * stays on its thread). Each thread is one instance for everything the planes already share through Redis
 * (its own key cache, event subscription, upstream pools, quota instance ids, usage batches). The response
 * cache (with its in-flight merge) and the upstream buffer budget are shared, so both are bounds on the
 * process and an answer is fetched once per process. The limits' counts are the process's, in shared memory:
 * the per-second counts (one rate-limit instance id for the process in Redis), the per-tenant caps and the
 * failed key look-ups.
 *
 * The main thread owns the signals and the exit code: SIGTERM/SIGINT, or a fault in any thread (an uncaught
 * exception there or here, a thread that failed to start or ended unasked), make every thread drain (each
 * flushes its quota and usage), and the process exits once all have ended: 0, or 1 after a fault. It also
 * serves /metrics on METRICS_PORT with every thread's series aggregated (threads/metrics.ts).
 */
export async function runThreads(config: DataPlaneConfig, threadCount: number): Promise<void> {
  const logger = createLogger("data-plane", config.LOG_LEVEL).child({ thread: 0 });
  // Counts the main thread's own process-level faults; its (other, empty) series merge with the threads'.
  const metrics = new PromMetrics();
  collectRuntimeMetrics(metrics.registry);
  const readyFlags = ThreadReadiness.allocate(threadCount);
  const bufferBudget = SharedBufferBudget.allocate();
  const tenantTables = allocateTenantTables();
  const keyLookupTable = KeyLookupThrottle.allocate();
  const rateLimitTable = WindowCounts.allocate();
  const rateLimitInstanceId = randomBytes(6).toString("hex");
  const quotaTables = allocateQuotaTables();
  const responseCache =
    config.CACHE_MAX_BYTES > 0
      ? allocateSharedCache(config.CACHE_MAX_BYTES, config.CACHE_ADMISSION)
      : undefined;
  const threads: Thread[] = [];
  let stopping = false;
  let exitCode = 0;
  let forceExitArmed = false;
  let nextCollection = 0;
  const collections = new Map<number, Collection>();
  /** During the first step of a shutdown: checks whether every thread closed its listen socket. */
  let unlistened = () => {};
  let signalStopped: () => void = () => {};
  /** Resolves (to undefined) once a shutdown began. */
  const stopped = new Promise<undefined>((resolve) => {
    signalStopped = () => resolve(undefined);
  });

  const send = (t: Thread, msg: ToThread) => {
    if (!t.exited) t.worker.postMessage(msg);
  };

  const exitWhenAllEnded = () => {
    if (stopping && threads.every((t) => t.exited)) {
      logger.info({ exitCode }, "every thread stopped");
      process.exit(exitCode);
    }
  };

  const stop = (signal: string, failed = false) => {
    if (failed) {
      exitCode = 1;
      if (!forceExitArmed) {
        forceExitArmed = true;
        // A thread that cannot finish its drain must not hang a failed process. Exiting while a thread
        // still holds uWS sockets makes Node abort (exit 134 instead of 1): non-zero either way, and only
        // when a thread is stuck past the whole shutdown budget.
        setTimeout(() => process.exit(1), shutdownBudgetMs(config) + 1_000).unref();
      }
    }
    if (stopping) return;
    stopping = true;
    signalStopped();
    logger.info({ signal, threads: threadCount }, "shutting down: draining in-flight requests");
    // Two steps: every thread closes its listen socket, then all drain. A drain answers with
    // `Connection: close`, and a client reconnecting while another thread still listened would land in
    // that thread's accept queue, which the kernel resets (not refuses) when it closes in turn.
    const listening = threads.filter((t) => !t.exited);
    void new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, UNLISTEN_TIMEOUT_MS);
      unlistened = () => {
        if (!listening.every((t) => t.exited || t.unlistened)) return;
        clearTimeout(timer);
        resolve();
      };
      for (const t of listening) send(t, { type: "stopListening" });
      unlistened();
    }).then(() => {
      for (const t of threads) send(t, { type: "stop", signal });
      exitWhenAllEnded();
    });
  };

  /** Every live thread's snapshot for one scrape (or its last one after COLLECT_TIMEOUT_MS). */
  const scrape = async (): Promise<string> => {
    const id = nextCollection++;
    const live = threads.filter((t) => !t.exited);
    const fresh = new Map<number, MetricsSnapshot>();
    await new Promise<void>((resolve) => {
      if (live.length === 0) return resolve();
      const timer = setTimeout(resolve, COLLECT_TIMEOUT_MS);
      collections.set(id, {
        fresh,
        done: () => {
          if (!live.every((t) => fresh.has(t.index) || t.exited)) return;
          clearTimeout(timer);
          resolve();
        },
      });
      for (const t of live) send(t, { type: "collect", id });
    });
    collections.delete(id);
    const snapshots: ThreadSnapshot[] = [];
    for (const t of threads) {
      const m = fresh.get(t.index) ?? t.last;
      if (m !== undefined) snapshots.push({ index: t.index, metrics: m, fresh: fresh.has(t.index) });
    }
    return renderProcessMetrics(await metrics.snapshot(), snapshots, threadCount);
  };

  const onMessage = (t: Thread, msg: FromThread, listening: (port: number) => void) => {
    switch (msg.type) {
      case "listening":
        t.listening = true;
        listening(msg.port);
        return;
      case "notListening":
        t.unlistened = true;
        unlistened();
        return;
      case "startFailed":
        // As with one thread: the reason on stderr, exit 1 (after the others are stopped).
        console.error(msg.message);
        stop("startFailed", true);
        return;
      case "fatal":
        stop("uncaughtException", true);
        return;
      case "snapshot": {
        t.last = msg.metrics;
        const c = collections.get(msg.id);
        if (c !== undefined) {
          c.fresh.set(t.index, msg.metrics);
          c.done();
        }
        return;
      }
    }
  };

  const start = (index: number, port: number): Promise<number> => {
    const data: ThreadData = {
      index,
      threads: threadCount,
      config: { ...config, DATA_PLANE_PORT: port },
      readyFlags,
      bufferBudget,
      tenantTables,
      keyLookupTable,
      rateLimitTable,
      rateLimitInstanceId,
      quotaTables,
      responseCache,
    };
    const worker = new Worker(join(__dirname, "worker.js"), { workerData: data });
    const t: Thread = {
      index,
      worker,
      listening: false,
      unlistened: false,
      exited: false,
      last: undefined,
    };
    threads.push(t);
    return new Promise<number>((resolve) => {
      worker.on("message", (msg: FromThread) => onMessage(t, msg, resolve));
      worker.on("error", (err) => {
        // Not an exception in serving (the thread's own policy catches those): the thread could not run.
        logger.fatal({ err, index }, "a serving thread failed");
        stop("threadError", true);
      });
      worker.on("exit", (code) => {
        t.exited = true;
        if (code !== 0) exitCode = 1;
        if (!stopping) {
          logger.fatal({ index, code }, "a serving thread ended on its own: draining the others");
          stop("threadExit", true);
        }
        for (const c of collections.values()) c.done();
        unlistened();
        exitWhenAllEnded();
      });
    });
  };

  installFaultPolicy(logger, metrics, () => stop("uncaughtException", true));
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));

  // DATA_PLANE_PORT=0 (tests, development) means any free port. uWS binds a port-0 listen socket without
  // SO_REUSEPORT, so the other threads could not join the first one's: the main thread asks the kernel for a
  // free port and every thread listens on that one.
  const port = config.DATA_PLANE_PORT === 0 ? await freePort(config.DATA_PLANE_HOST) : config.DATA_PLANE_PORT;
  const starts: Promise<number>[] = [];
  for (let i = 1; i <= threadCount; i++) starts.push(start(i, port));
  // A failed start stops the process: startup then waits no more for the threads still starting.
  if ((await Promise.race([Promise.all(starts), stopped])) === undefined) return;
  logger.info({ port, threads: threadCount }, "data plane threads listening");
  // After the threads (their checks come first); a metrics port already taken stops the process like a
  // thread that cannot listen: the reason on stderr, exit 1.
  await serveMetrics({
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    contentType: metrics.contentType,
    render: scrape,
    logger,
  }).catch((err: unknown) => {
    console.error(
      `data plane could not serve metrics on ${config.METRICS_HOST}:${config.METRICS_PORT}: ${err instanceof Error ? err.message : String(err)}`,
    );
    stop("startFailed", true);
  });
}
