import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { currentTelemetry } from "./telemetry";

/** What a BullMQ job has that its span names (a structural subset, so shared/ needs no bullmq import). */
interface JobLike {
  readonly name: string;
  readonly queueName: string;
  readonly id?: string | undefined;
  readonly attemptsMade: number;
}

/**
 * A BullMQ processor with one span per job, named `{queue} {job}`, active while the job runs so that its
 * database calls (pg instrumentation) are its children. With tracing off, the processor itself.
 */
export function tracedProcessor<J extends JobLike, R, A extends unknown[]>(
  processor: (job: J, ...rest: A) => Promise<R>,
): (job: J, ...rest: A) => Promise<R> {
  const tracer = currentTelemetry()?.tracer;
  if (tracer === undefined) return processor;
  return (job, ...rest) =>
    tracer.startActiveSpan(
      `${job.queueName} ${job.name}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          "messaging.system": "bullmq",
          "messaging.operation.type": "process",
          "messaging.destination.name": job.queueName,
          "messaging.message.id": job.id ?? "",
          "bullmq.job.name": job.name,
          "bullmq.job.attempts_made": job.attemptsMade,
        },
      },
      async (span) => {
        try {
          return await processor(job, ...rest);
        } catch (err) {
          span.recordException(err as Error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
          throw err;
        } finally {
          span.end();
        }
      },
    );
}
