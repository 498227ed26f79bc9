import type { RequestContext } from "../auth/context";

/**
 * Batches the loads one resolver makes for many parents (DataLoader's batching without its cache): every
 * `load` made in the same tick joins one `fetch` of all their keys, run on the next tick. Nothing is
 * remembered after a batch, so a loader kept on a long-lived graphql-ws context never serves stale rows.
 */
export class BatchLoader<K, V> {
  private pending: Map<K, { resolve: (v: V) => void; reject: (e: unknown) => void }[]> | null = null;

  constructor(
    /** Answers for every key, in any order: a key missing from the map gets `fallback(key)`. */
    private readonly fetch: (keys: K[]) => Promise<Map<K, V>>,
    private readonly fallback: (key: K) => V,
  ) {}

  load(key: K): Promise<V> {
    if (this.pending === null) {
      this.pending = new Map();
      process.nextTick(() => void this.dispatch());
    }
    const batch = this.pending;
    return new Promise<V>((resolve, reject) => {
      const waiting = batch.get(key);
      if (waiting) waiting.push({ resolve, reject });
      else batch.set(key, [{ resolve, reject }]);
    });
  }

  private async dispatch(): Promise<void> {
    const batch = this.pending!;
    this.pending = null;
    try {
      const found = await this.fetch([...batch.keys()]);
      for (const [key, waiting] of batch) {
        const v = found.has(key) ? found.get(key)! : this.fallback(key);
        for (const w of waiting) w.resolve(v);
      }
    } catch (err) {
      for (const waiting of batch.values()) for (const w of waiting) w.reject(err);
    }
  }
}

/**
 * The request's loader named `name`, created on first use: one per GraphQL request (or graphql-ws
 * connection), so the batches of one request never mix with another's.
 */
export function batchLoader<K, V>(
  ctx: RequestContext,
  name: string,
  fetch: (keys: K[]) => Promise<Map<K, V>>,
  fallback: (key: K) => V,
): BatchLoader<K, V> {
  ctx.loaders ??= new Map();
  let l = ctx.loaders.get(name) as BatchLoader<K, V> | undefined;
  if (!l) {
    l = new BatchLoader(fetch, fallback);
    ctx.loaders.set(name, l as BatchLoader<unknown, unknown>);
  }
  return l;
}

/** Groups rows by a key (rows keep their order). */
export function groupBy<K, T>(rows: T[], key: (row: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const r of rows) {
    const k = key(r);
    const list = out.get(k);
    if (list) list.push(r);
    else out.set(k, [r]);
  }
  return out;
}
