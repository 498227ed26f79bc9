/**
 * Preloaded (`node --require`) into a data-plane child by process-faults.test.ts: the first SIGUSR2 leaves
 * a promise rejection unhandled, the second throws from a timer. Both come from outside any uWS handler,
 * which is what the process-level policy in data-plane/src/main.ts is for. Never loaded by the product.
 */
let signals = 0;
process.on("SIGUSR2", () => {
  signals++;
  if (signals === 1) {
    void Promise.reject(new Error("injected unhandled rejection"));
  } else {
    setTimeout(() => {
      throw new Error("injected uncaught exception");
    }, 0);
  }
});
