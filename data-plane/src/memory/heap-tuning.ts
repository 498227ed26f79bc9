import { setFlagsFromString } from "node:v8";

/**
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
export function tuneHeap(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${Math.floor(percent)}`);
}
