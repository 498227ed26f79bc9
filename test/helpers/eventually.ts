/**
 * The one way tests wait for something to happen: `check` is polled until it returns a value other than
 * `undefined` or `false`, which is returned; past `ms` the wait fails, naming `what`. The polling interval
 * is no assumption about how long the event takes: only the deadline bounds it, and it is generous, so a
 * loaded machine makes a test slower, not red.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  ms = 10_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Resolves at the start of the next wall-clock second (per-second windows are aligned to it). */
export async function nextSecond(): Promise<void> {
  const second = Math.floor(Date.now() / 1000);
  await eventually(() => Math.floor(Date.now() / 1000) > second, "the next second", 2_000, 1);
}
