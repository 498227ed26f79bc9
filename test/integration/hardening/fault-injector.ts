import { BroadcastChannel, isMainThread, workerData } from "node:worker_threads";

/**
 * Preloaded (`node --require`) into a data-plane child by process-faults.test.ts: the first SIGUSR2 leaves
 * a promise rejection unhandled, the second throws from a timer. Both come from outside any uWS handler,
 * which is what the process-level policy in data-plane/src/threads/fault-policy.ts is for. Never loaded
 * by the product.
 *
 * Signals reach the main thread only. With FAULT_THREAD=N (DATA_PLANE_THREADS > 1; worker threads run the
 * preload too, as they inherit the process's execArgv) the main thread passes each signal on over a
 * BroadcastChannel and serving thread N injects the fault instead.
 */
const target = Number(process.env.FAULT_THREAD ?? 0);
let signals = 0;

function inject(): void {
  signals++;
  if (signals === 1) {
    void Promise.reject(new Error("injected unhandled rejection"));
  } else {
    setTimeout(() => {
      throw new Error("injected uncaught exception");
    }, 0);
  }
}

if (isMainThread) {
  process.on("SIGUSR2", () => {
    if (target === 0) return inject();
    const channel = new BroadcastChannel("fault-injector");
    channel.postMessage("fault");
    channel.close();
  });
} else if (target !== 0 && (workerData as { index?: number } | undefined)?.index === target) {
  const channel = new BroadcastChannel("fault-injector");
  channel.unref();
  channel.onmessage = () => inject();
}
