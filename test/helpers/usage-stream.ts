import type { DataPlane } from "../../data-plane/src/data-plane";
import { eventually } from "./eventually";

/**
 * Everything counted so far is in Postgres: the data planes' pending rows are flushed to the stream, and
 * every consumer group has read (lag 0) and acknowledged (nothing pending) every entry, which the worker
 * does after the rows are committed. What a report shows then is final: nothing more can trickle in.
 */
export async function usageSettled(
  redis: { xinfo(subcommand: "GROUPS", key: string): Promise<unknown> },
  stream: string,
  planes: readonly DataPlane[] = [],
  ms = 30_000,
): Promise<void> {
  for (const p of planes) await p.usage.flush();
  await eventually(
    async () => {
      const groups = (await redis.xinfo("GROUPS", stream)) as unknown[][];
      return (
        groups.length > 0 &&
        groups.every((g) => {
          const f: Record<string, unknown> = {};
          for (let i = 0; i + 1 < g.length; i += 2) f[String(g[i])] = g[i + 1];
          return Number(f.lag) === 0 && Number(f.pending) === 0;
        })
      );
    },
    "the usage stream is drained",
    ms,
  );
}
