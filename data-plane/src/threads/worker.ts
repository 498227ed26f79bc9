import { parentPort, workerData } from "node:worker_threads";
import { createLogger } from "../../../shared/src/log/logger";
import { type DataPlane, type PlaneThreadHooks, startDataPlane } from "../data-plane";
import { sharedTenantCounts } from "../limits/tenant-counts";
import { PromMetrics } from "../metrics/metrics";
import { collectRuntimeMetrics } from "../metrics/runtime";
import { SharedBufferBudget } from "../upstream/buffer-budget";
import { installFaultPolicy } from "./fault-policy";
import type { FromThread, ThreadData, ToThread } from "./protocol";
import { ThreadReadiness } from "./readiness";

/** How often this thread publishes its readiness to the others (the shared flags). */
const READY_PUBLISH_MS = 100;

/**
 * One serving thread of a data plane run with DATA_PLANE_THREADS > 1 (started by threads/supervisor.ts):
 * a whole `startDataPlane` of its own, listening on the process's port. It leaves signals and the exit
 * code to the main thread: it stops when told to, and reports an uncaught exception to it.
 */
function run(port: NonNullable<typeof parentPort>, data: ThreadData): void {
  const post = (msg: FromThread) => port.postMessage(msg);
  const { config, index, threads } = data;
  const logger = createLogger("data-plane", config.LOG_LEVEL, { sync: true }).child({ thread: index });
  const metrics = new PromMetrics();
  collectRuntimeMetrics(metrics.registry, index);
  const readiness = new ThreadReadiness(data.readyFlags, index - 1, threads);
  let plane: DataPlane | undefined;
  let stopping = false;
  /** Set by `stopListening` (the first step of a shutdown): not ready any more. */
  let unlisted = false;

  const hooks: PlaneThreadHooks = {
    index,
    ready: (own) => readiness.processReady(own),
  };

  const stop = () => {
    if (stopping) return;
    stopping = true;
    readiness.publish(false);
    // Before the plane exists (a stop during startup) the start below calls this again once it does.
    if (plane === undefined) return;
    plane.close().then(
      // Safe only now: exiting a thread whose uWS app still has sockets aborts the whole process. close()
      // ends with every connection closed (HttpServer.closeAll).
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "error during shutdown");
        process.exit(1);
      },
    );
  };

  port.on("message", (msg: ToThread) => {
    switch (msg.type) {
      case "stopListening":
        // Not ready from now on, for the other threads' /readyz too.
        unlisted = true;
        readiness.publish(false);
        plane?.stopListening();
        post({ type: "notListening" });
        return;
      case "stop":
        stop();
        return;
      case "collect":
        metrics.snapshot().then(
          (snapshot) => post({ type: "snapshot", id: msg.id, metrics: snapshot }),
          (err: unknown) => logger.error({ err }, "could not collect this thread's metrics"),
        );
        return;
    }
  });
  installFaultPolicy(logger, metrics, () => post({ type: "fatal" }));

  startDataPlane(config, {
    logger,
    metrics,
    bufferBudget: new SharedBufferBudget(config.UPSTREAM_BUFFER_BUDGET_BYTES, data.bufferBudget),
    tenantCounts: sharedTenantCounts(data.tenantTables),
    keyLookupTable: data.keyLookupTable,
    rateLimitTable: data.rateLimitTable,
    rateLimitInstanceId: data.rateLimitInstanceId,
    quotaTables: data.quotaTables,
    responseCache: data.responseCache,
    thread: hooks,
  }).then(
    (started) => {
      plane = started;
      const publish = () => readiness.publish(!stopping && !unlisted && started.ready());
      publish();
      setInterval(publish, READY_PUBLISH_MS).unref();
      post({ type: "listening", port: started.port });
      if (stopping) {
        stopping = false;
        stop();
      }
    },
    (err: unknown) => {
      post({ type: "startFailed", message: err instanceof Error ? err.message : String(err) });
      process.exit(1);
    },
  );
}

if (parentPort === null)
  throw new Error("threads/worker.js runs as a worker thread (see threads/supervisor.ts)");
run(parentPort, workerData as ThreadData);
