/** Wall clock in epoch milliseconds; injected so tests can step time across window and day boundaries. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
