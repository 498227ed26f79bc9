/** What the network head is computed from: one upstream's health-checked head and breaker state. */
export interface HeadSource {
  /** Last head height from a health check; -1 = unknown. */
  readonly head: number;
  readonly breakerOpen: boolean;
}

/** Default of HEAD_OUTLIER_BLOCKS (see networkHead). */
export const DEFAULT_HEAD_OUTLIER_BLOCKS = 1000;

/**
 * The network's head: what upstream lag (HEALTH_MAX_LAG_BLOCKS), the cache's per-block keys and the head
 * seen in answers are measured against. Only upstreams with a closed breaker and a known head count.
 *
 * Rule: the highest head that another upstream confirms, a head being confirmed when some other upstream's
 * head is within `outlierBlocks` of it (below or above: a node far above confirms nothing either). With
 * one upstream its head is the network's. With several and none confirmed (every two heads more than
 * `outlierBlocks` apart), the lowest head.
 *
 * Why: one node reporting a head far beyond the others (a node of another chain behind a wrong URL, a
 * broken or hostile provider) must not become the network head, or every honest node would count as
 * lagging and stop being selected, leaving all traffic to that node, and the cache would be keyed to a
 * head that never comes. With three or more upstreams the lone outlier is outvoted: [1000000, 105, 100]
 * gives 105. With two far apart, nothing says which one is wrong: the far-ahead one may lie, or the other
 * may be syncing. Taking the lower head is the safe side: both stay selectable (a node is only ever
 * excluded for being *below* the network head), the worst case is answers as old as the slower node's
 * (true data of the chain, just not the newest) until they come together again, whereas taking the
 * higher head would hand every call to a node that may be lying. An operator who wants a syncing node
 * set aside automatically runs three upstreams or more. The threshold is in blocks, so it is set from
 * the fastest chain's block rate: above how far a healthy node can fall behind and catch up.
 *
 * O(n^2) in upstreams without allocation: networks have a handful, and this runs on every selection.
 */
export function networkHead(sources: readonly HeadSource[], outlierBlocks: number): number {
  let best = -1;
  let lowest = -1;
  let known = 0;
  for (const u of sources) {
    if (u.breakerOpen || u.head < 0) continue;
    known++;
    if (lowest < 0 || u.head < lowest) lowest = u.head;
    if (u.head <= best) continue;
    for (const w of sources) {
      if (w !== u && !w.breakerOpen && w.head >= 0 && Math.abs(w.head - u.head) <= outlierBlocks) {
        best = u.head;
        break;
      }
    }
  }
  if (known <= 1 || best < 0) return lowest;
  return best;
}
