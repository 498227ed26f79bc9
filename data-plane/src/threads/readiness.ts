/**
 * Readiness of a process with several serving threads: each thread publishes its own in one Int32 of a
 * SharedArrayBuffer (its slot: index - 1), and a thread's /readyz says ready only when every slot is 1.
 * The kernel sends a new connection to any thread listening, so a process that is ready must be ready on
 * every thread; a load balancer then sends no traffic to a process with a thread not ready (still starting,
 * Redis subscription lost, shutting down).
 */
export class ThreadReadiness {
  private readonly flags: Int32Array;

  constructor(
    shared: SharedArrayBuffer,
    private readonly slot: number,
    private readonly threads: number,
  ) {
    this.flags = new Int32Array(shared, 0, threads);
  }

  /** The buffer for `threads` threads (all not ready). */
  static allocate(threads: number): SharedArrayBuffer {
    return new SharedArrayBuffer(4 * threads);
  }

  publish(ready: boolean): void {
    Atomics.store(this.flags, this.slot, ready ? 1 : 0);
  }

  /** The process's readiness as seen by this thread, given its own (read now, not as last published). */
  processReady(own: boolean): boolean {
    if (!own) return false;
    for (let i = 0; i < this.threads; i++)
      if (i !== this.slot && Atomics.load(this.flags, i) !== 1) return false;
    return true;
  }
}
