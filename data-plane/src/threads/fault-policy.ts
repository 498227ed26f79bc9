import type { Logger } from "../../../shared/src/log/logger";
import type { Metrics } from "../metrics/metrics";

/**
 * The process-level policy for faults outside any uWS handler, installed by every thread of the process
 * (the single thread with DATA_PLANE_THREADS=1; otherwise the main thread and each serving thread, whose
 * `process` events are their own). Every uWS handler is guarded (server/guard.ts), so what reaches these
 * comes from elsewhere (timers, event emitters, background promise chains).
 * - A rejected promise nobody handled is a forgotten catch on background work (a Redis write, a health
 *   probe): the requests it belongs to have their own error paths, so it is logged, counted and the thread
 *   keeps serving instead of dropping every client for one missed catch.
 * - An uncaught exception left a synchronous call chain half done, in unknown state (a counter not
 *   decremented, a map entry not removed): serving on could go on wrong silently. It is logged and
 *   counted, then `onFatal` drains the whole process (every thread flushes its usage, so nothing answered
 *   goes uncounted) and exits 1 for its supervisor (`npm start`, compose `restart:`, Kubernetes) to restart
 *   it. One thread's fault stops every thread: they share the process, and a restart is the known state.
 */
export function installFaultPolicy(logger: Logger, metrics: Metrics, onFatal: () => void): void {
  process.on("unhandledRejection", (reason) => {
    metrics.handlerException("process.unhandledRejection");
    logger.error({ err: reason }, "unhandled promise rejection (kept serving)");
  });
  process.on("uncaughtException", (err) => {
    metrics.handlerException("process.uncaughtException");
    logger.fatal({ err }, "uncaught exception: draining and exiting for a restart");
    onFatal();
  });
}
