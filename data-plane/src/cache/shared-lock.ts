/**
 * A mutex in one Int32 of shared memory, for the serving threads of a process (futex style, after
 * Drepper's "Futexes Are Tricky"): 0 free, 1 held, 2 held with possible sleepers. Held only for a few
 * loads and stores or a copy, so a taker spins a little before it sleeps on the word.
 */

/** Tries on the lock before sleeping on it. */
const SPINS = 64;

export function lock(a: Int32Array, i: number): void {
  if (Atomics.compareExchange(a, i, 0, 1) === 0) return;
  for (let n = 0; n < SPINS; n++) {
    if (Atomics.load(a, i) === 0 && Atomics.compareExchange(a, i, 0, 1) === 0) return;
  }
  // 2 = held with (possible) sleepers: the holder's unlock then wakes one.
  while (Atomics.exchange(a, i, 2) !== 0) Atomics.wait(a, i, 2);
}

export function unlock(a: Int32Array, i: number): void {
  if (Atomics.sub(a, i, 1) !== 1) {
    Atomics.store(a, i, 0);
    Atomics.notify(a, i, 1);
  }
}
