/**
 * The time a pool reads and the timers it sets, in one object so that tests where time is the subject
 * (hedge delays, coalescing turns, back-offs in selection) can move it by hand. The pool reads wall time
 * for availability and budgets (epoch ms, as Upstream.available takes it) and performance.now() for
 * exchange durations.
 */
export interface PoolClock {
  /** Epoch milliseconds (Date.now()). */
  now(): number;
  /** A monotonic millisecond reading for durations (performance.now()). */
  monotonic(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs `fn` in the check phase of this event-loop turn (after the answers read in its poll phase). */
  setImmediate(fn: () => void): void;
}

/** The process's own clock and timers. */
export const SYSTEM_CLOCK: PoolClock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  setImmediate: (fn) => {
    setImmediate(fn);
  },
};
