import { randomUUID } from "node:crypto";
import { eventually } from "./eventually";

/**
 * Waits until every plane event published before this call has reached `events` (the list a test's
 * subscriber appends to): a marker published now arrives after them, on the same channel. The marker is
 * removed again. This is how a test checks that nothing was announced: no sleep, no guess at latency.
 */
export async function planeEventsBarrier(
  redis: { publish(channel: string, message: string): Promise<unknown> },
  channel: string,
  events: { type: string }[],
): Promise<void> {
  const type = `test.marker.${randomUUID()}`;
  await redis.publish(channel, JSON.stringify({ type }));
  await eventually(() => events.some((e) => e.type === type), "the marker event");
  for (let i = events.length - 1; i >= 0; i--) if (events[i]!.type === type) events.splice(i, 1);
}
