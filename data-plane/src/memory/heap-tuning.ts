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
 * of two steady states, the bad one with several times the GC time (`bench:profile batch` over many
 * starts; docs/benchmarks.md, "Two steady states"). With pretenuring off, every start lands in the good
 * state.
 *
 * Sets how far V8 lets the old generation grow past what the last full GC kept before it runs the next:
 * a fixed factor of 1 + percent/100 in place of V8's own, which picks 1.1 to 4 by GC speed and memory
 * pressure.
 *
 * The gateway's old generation is mostly its caches (keys, responses), and bursts of new keys leave
 * garbage there (a second's rate-limiter window, a minute's usage rows, outgrown Map tables). With V8's
 * factor that garbage could reach the size of the caches before a full GC, and V8 keeps the pages
 * afterwards: the bench's RSS step (a burst of new keys) shows it (docs/benchmarks.md, "RSS"). Full GCs
 * are then more frequent only while the old generation grows, which costs no measurable CPU per request.
 *
 * V8 reads the flag each time it computes the next limit, so setting it at start-up applies to the whole
 * run. `percent` 0 leaves V8's heuristics.
 */
export function tuneHeap(percent: number, pretenuring: boolean): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${Math.floor(percent)}`);
  if (!pretenuring) setFlagsFromString("--no-allocation-site-pretenuring");
}
