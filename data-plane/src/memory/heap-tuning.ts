import { setFlagsFromString } from "node:v8";

/**
 * Two V8 heap settings, both process-wide (every thread's heap) and read by V8 as it goes, so setting
 * them at start-up applies to the whole run.
 *
 * Allocation-site pretenuring off (`pretenuring` false, the default): V8 watches, per place in the code
 * that allocates, how many of its objects survive a young-generation GC, and past a threshold allocates
 * that site's objects directly in the old generation. A request's objects (its body, parsed calls, plan)
 * live exactly as long as its upstream exchange, so under load many survive one scavenge and then die:
 * V8 then pretenures them, and they fill the old generation with garbage that only full GCs reclaim.
 * Whether it tips over depends on timing in the first seconds, so a freshly started gateway ran in one
 * of two steady states (bench:profile batch, 9 starts: 46-53 µs user CPU per batch of 100, or 82-94 µs
 * with 3x the main thread's GC time and twice the full GCs). With pretenuring off: 9 starts out of 9 in
 * the good state (41-53 µs).
 *
 * Sets how far V8 lets the old generation grow past what the last full GC kept before it runs the next:
 * a fixed factor of 1 + percent/100 in place of V8's own, which picks 1.1 to 4 by GC speed and memory
 * pressure.
 *
 * The gateway's old generation is mostly its caches (keys, responses), and bursts of new keys leave
 * garbage there (a second's rate-limiter window, a minute's usage rows, outgrown Map tables). With V8's
 * factor that garbage could reach the size of the caches before a full GC, and V8 keeps the pages
 * afterwards: measured with 100,000 keys loaded in one burst (the bench's RSS step, 3 runs each), RSS
 * 185-208 MiB with V8's factor, 164-166 MiB with the flag on the command line and 170-180 MiB set here at
 * start-up (after modules load). Full GCs are then more frequent only while the old generation grows;
 * cache-hit CPU per request and cache-miss p99 were unchanged within noise.
 *
 * V8 reads the flag each time it computes the next limit, so setting it at start-up applies to the whole
 * run. `percent` 0 leaves V8's heuristics.
 */
export function tuneHeap(percent: number, pretenuring: boolean): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${Math.floor(percent)}`);
  if (!pretenuring) setFlagsFromString("--no-allocation-site-pretenuring");
}
