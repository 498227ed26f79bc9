import { Worker } from "node:worker_threads";

/**
 * Runs `threads` worker threads, each executing `body` (JavaScript, run as an async function, so it may
 * `await`) and resolves with what each returned, in thread order. In scope: `data` (the `data` given
 * here: SharedArrayBuffers in it are shared, the rest is copied), `index` (0 to threads - 1), `threads`,
 * and `barrier(round)`.
 *
 * The threads start together (each spins at a start line until all are up), so their loops overlap.
 * `barrier(round)` returns once every thread has reached round `round`: a body that works in rounds keeps
 * every thread in the race however the scheduler runs them (four threads on two cores: one thread could
 * otherwise finish its whole loop in one time slice).
 */
export async function raceThreads<T>(
  threads: number,
  data: Record<string, unknown>,
  body: string,
): Promise<T[]> {
  /**
   * [0]: start line (each thread adds 1 once ready and spins until all have); [1]: rounds reached, for
   * `barrier` (each thread adds 1 per round and sleeps until all have).
   */
  const gate = new SharedArrayBuffer(8);
  const source = `
    const { parentPort, workerData } = require("node:worker_threads");
    const { data, gate, threads, index } = workerData;
    const g = new Int32Array(gate);
    const barrier = (round) => {
      Atomics.add(g, 1, 1);
      Atomics.notify(g, 1);
      for (;;) {
        const reached = Atomics.load(g, 1);
        if (reached >= threads * (round + 1)) return;
        Atomics.wait(g, 1, reached, 5);
      }
    };
    const run = async () => { ${body} };
    Atomics.add(g, 0, 1);
    while (Atomics.load(g, 0) < threads) {}
    run().then((v) => parentPort.postMessage(v));
  `;
  return Promise.all(
    Array.from(
      { length: threads },
      (_, index) =>
        new Promise<T>((resolve, reject) => {
          const w = new Worker(source, { eval: true, workerData: { data, gate, threads, index } });
          w.once("message", resolve);
          w.once("error", reject);
          w.once("exit", (code) => reject(new Error(`thread ${index} exited (${code}) without an answer`)));
        }),
    ),
  );
}
